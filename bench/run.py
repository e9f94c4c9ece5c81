"""`make bench` (`python -m bench.run`): the simulator, nginx and the gateway measured in one
run, written to bench/results/ as JSON and Markdown. `--quick` shortens every phase (a smoke
run, not figures)."""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench import (
    calibration,
    compare,
    fleet,
    floor,
    memory,
    overload,
    postgres,
    progress,
    report,
    standard_client,
    tls,
    tracing,
    translation,
)
from bench.gateway import start_bare_core, start_gateway
from bench.nginx import start_nginx
from bench.procs import RESULTS, cpus, start_instant_sim
from bench.services import free_port


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="short phases: a smoke run")
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--skip-overload", action="store_true")
    parser.add_argument("--skip-fleet", action="store_true")
    parser.add_argument("--skip-standard-client", action="store_true")
    parser.add_argument("--skip-floor", action="store_true")
    parser.add_argument("--skip-tracing", action="store_true")
    parser.add_argument("--skip-progress", action="store_true")
    parser.add_argument("--skip-tls", action="store_true")
    parser.add_argument("--skip-translation", action="store_true")
    args = parser.parse_args()
    seconds = 3 if args.quick else 10
    levels = [200, 400] if args.quick else [1000, 2000, 5000, 10000]
    proxy_cpu, client_cpu = cpus()
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="sluicegate-bench-") as tmp:
        workdir = Path(tmp)
        results_calibration = calibration.run(workdir, seconds, client_cpu)
        # Every process is stopped on the way out, whatever fails after it started.
        with ExitStack() as running:
            sim, sim_address = start_instant_sim(workdir, client_cpu)
            running.callback(sim.stop)
            nginx_port = free_port()
            nginx = start_nginx(workdir, sim_address, nginx_port, proxy_cpu)
            running.callback(nginx.stop)
            gateway = start_gateway(workdir, sim_address, proxy_cpu)
            running.callback(gateway.proc.stop)
            baselines = {
                "usage_off": start_bare_core(workdir, sim_address, proxy_cpu),
                "journal_only": start_bare_core(workdir, sim_address, proxy_cpu, journal=True),
            }
            pg_url = postgres.fresh_database()
            if pg_url:
                (workdir / "pg").mkdir()
                baselines["serve_postgresql"] = start_gateway(
                    workdir / "pg", sim_address, proxy_cpu, database_url=pg_url
                )
            for baseline in baselines.values():
                running.callback(baseline.proc.stop)
            time.sleep(1.0)
            idle_rss = gateway.proc.rss_kib()
            data = compare.run(
                workdir,
                sim_address,
                f"127.0.0.1:{nginx_port}",
                gateway,
                nginx,
                2 if args.quick else 4,
                client_cpu,
                baselines=baselines,
                rounds=2 if args.quick else 3,
            )
            results: dict[str, Any] = {
                "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
                "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
                "pinning": {"proxy_cpu": proxy_cpu, "client_and_sim_cpu": client_cpu},
                "quick": args.quick,
                "idle_rss_kib": idle_rss,
                "calibration": results_calibration,
                "summary": compare.summary(data),
                "reports": data["reports"],
            }
        if not args.skip_standard_client:
            results["standard_client"] = standard_client.run(
                workdir / "standard-client",
                2 if args.quick else 6,
                1 if args.quick else 3,
                proxy_cpu,
                client_cpu,
            )
        if not args.skip_floor:
            results["floor"] = floor.run(
                workdir / "floor",
                2 if args.quick else 6,
                1 if args.quick else 3,
                proxy_cpu,
                client_cpu,
            )
        if not args.skip_progress:
            results["progress"] = progress.run_with_sim(
                workdir / "progress",
                3 if args.quick else 8,
                1 if args.quick else 3,
                proxy_cpu,
                client_cpu,
            )
        if not args.skip_memory:
            results["memory"] = memory.run(workdir, levels, proxy_cpu, client_cpu)
        if not args.skip_overload:
            results["overload"] = overload.run(
                workdir / "overload", 5 if args.quick else 20, proxy_cpu, client_cpu
            )
        if not args.skip_tracing:
            results["tracing"] = tracing.run_with_sim(
                workdir / "tracing",
                3 if args.quick else 8,
                2 if args.quick else 4,
                (proxy_cpu, client_cpu),
            )
        if not args.skip_translation:
            results["translation"] = translation.run_with_sim(
                workdir / "translation",
                3 if args.quick else 8,
                2 if args.quick else 4,
                (proxy_cpu, client_cpu),
            )
        if not args.skip_tls:
            results["tls"] = tls.run(
                workdir / "tls",
                3 if args.quick else 8,
                2 if args.quick else 3,
                proxy_cpu,
                client_cpu,
            )
        if not args.skip_fleet:
            results["fleet"] = fleet.run_with_sim(
                workdir / "fleet", 3 if args.quick else 8, 2 if args.quick else 3, client_cpu
            )
    results["seconds"] = round(time.time() - started, 1)
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = "quick" if args.quick else "latest"
    (RESULTS / f"{name}.json").write_text(json.dumps(results, indent=2))
    (RESULTS / f"{name}.md").write_text(report.markdown(results))
    print(report.markdown(results))
    print(f"[bench] written to {RESULTS}/{name}.json and .md in {results['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
