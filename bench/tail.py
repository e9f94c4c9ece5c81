"""The c=1 tail apart from the full bench: the simulator directly, nginx and the data plane
(`bench/bare_core.py`), optionally `serve` in the same rounds, on its own simulator or on the
shared one, in interleaved rounds on the bench's pinning. It prints each run's percentiles.

    .venv/bin/python -m bench.tail [--rounds 2] [--seconds 5] [--serve shared|own]

Many short rounds show the spread of the data plane's added p99 against nginx's, which one full
`make bench` (three rounds) cannot (`bench/README.md`).
"""

from __future__ import annotations

import argparse
import tempfile
from contextlib import ExitStack
from pathlib import Path

from bench import loadgen
from bench.compare import WHOLE
from bench.gateway import MODEL, start_bare_core, start_gateway
from bench.nginx import start_nginx
from bench.procs import cpus, start_instant_sim
from bench.services import free_port


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--serve", choices=["none", "shared", "own"], default="none")
    args = parser.parse_args()
    proxy_cpu, client_cpu = cpus()
    with tempfile.TemporaryDirectory(prefix="sluicegate-tail-") as tmp, ExitStack() as running:
        workdir = Path(tmp)
        sim, address = start_instant_sim(workdir / "sim", client_cpu)
        running.callback(sim.stop)
        port = free_port()
        nginx = start_nginx(workdir, address, port, proxy_cpu)
        running.callback(nginx.stop)
        plane = start_bare_core(workdir, address, proxy_cpu)
        running.callback(plane.proc.stop)
        targets = {
            "direct": (f"http://{address}", "sim-model", None),
            "nginx": (f"http://127.0.0.1:{port}", "sim-model", None),
        }
        if args.serve != "none":
            upstream = address
            if args.serve == "own":
                own, upstream = start_instant_sim(workdir / "sim-serve", client_cpu)
                running.callback(own.stop)
            (workdir / "serve").mkdir()
            serve = start_gateway(workdir / "serve", upstream, proxy_cpu)
            running.callback(serve.proc.stop)
            targets["serve"] = (serve.url, MODEL, serve.key)
        targets["data plane"] = (plane.url, MODEL, plane.key)
        shape = [*WHOLE, "--concurrency", "1", "--duration", f"{args.seconds}s"]
        for i in range(args.rounds):
            for name, (url, model, key) in targets.items():
                report = loadgen.run(
                    workdir,
                    f"tail-{name.replace(' ', '-')}-{i + 1}",
                    url,
                    [*shape, "--model", model],
                    client_cpu,
                    key,
                )
                t = report["total_ms"]
                print(
                    f"round {i + 1} {name:<10} n={t['n']} p50={t['p50']:.3f} p90={t['p90']:.3f} "
                    f"p99={t['p99']:.3f} max={t['max']:.3f} ms",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
