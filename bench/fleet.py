"""The fleet scenario: three `serve` replicas on one PostgreSQL database behind HAProxy, against
the instant simulator, twice: with the key's limits shared through a Redis of the bench's own
(`shared`), and with each replica limiting on its own, no Redis (`own`). The key carries every
kind of limit (RPM, TPM, concurrency, a token quota), set well above what the bench reaches, so
every request goes through the limit path without being refused.

Reported, as medians of interleaved rounds: fleet throughput at c=64 shared against own (target
>= 0.9), the p50 at c=1 the shared path adds (target <= 0.1 ms), and Redis commands per request
at c=64 from `INFO commandstats` (target <= 0.1): the scripts the replicas ran (round trips) and
every command those scripts called."""

from __future__ import annotations

import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

import httpx
from cryptography.fernet import Fernet

from bench import loadgen, postgres
from bench.compare import WHOLE
from bench.gateway import MODEL, config, create_key, serve_env, start_serve
from bench.procs import Proc, cpus, start_instant_sim, write_results
from bench.services import HAProxy, Redis

REPLICAS = 3
# Limits the bench never reaches, so that what is measured is their cost, not their refusals.
KEY_LIMITS: dict[str, Any] = {
    "rpm": 6_000_000,
    "tpm": 6_000_000_000,
    "max_concurrency": 1_000,
    "quota": {"period": "daily", "tokens": 10**14},
}
C1 = [*WHOLE, "--concurrency", "1"]
C64 = [*WHOLE, "--concurrency", "64"]


@dataclass
class Fleet:
    name: str
    lb: HAProxy
    key: str
    procs: list[Proc] = field(default_factory=list)
    redis: Redis | None = None


def start_fleet(
    workdir: Path, name: str, sim: str, database_url: str, redis: Redis | None, running: ExitStack
) -> Fleet:
    """Replicas started one after the other (the first one bootstraps the database), a key made
    through the first and followed by the others, HAProxy in front once every replica is ready."""
    env = serve_env(Fernet.generate_key().decode())
    procs, admins, data_urls = [], [], []
    for i in range(REPLICAS):
        home = workdir / f"{name}-{i}"
        home.mkdir(parents=True)
        extra = f'[fleet]\nname = "{name}-{i}"\nheartbeat_ms = 500\n'
        if redis is not None:
            extra += f'[redis]\nurl = "{redis.url}"\nkey_prefix = "bench-{name}"\n'
        conf = config(home, sim, {"members": [{"provider_id": "sim"}]}, 1, database_url, extra)
        proc, url, admin = start_serve(home, f"{name}-{i}", conf, None, env)
        running.callback(proc.stop)
        procs.append(proc)
        admins.append(admin)
        data_urls.append(url)
    key = create_key(admins[0], **KEY_LIMITS)
    for url in data_urls:
        wait_admitted(url, key)
    lb = HAProxy(workdir / name, [int(u.rsplit(":", 1)[1]) for u in data_urls], maxconn=1024)
    lb.start()
    running.callback(lb.stop)
    return Fleet(name, lb, key, procs, redis)


def wait_admitted(url: str, key: str, timeout: float = 20.0) -> None:
    """Until the replica at `url` knows the key (it follows the one that made it)."""
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    deadline = time.monotonic() + timeout
    while True:
        r = httpx.post(
            url + "/v1/chat/completions",
            json=body,
            headers={"Authorization": f"Bearer {key}"},
            timeout=10,
        )
        if r.status_code == 200:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not admit the bench key: {r.status_code} {r.text[:300]}")
        time.sleep(0.1)


def run(
    workdir: Path, sim: str, seconds: int, rounds: int, client_cpu: int | None
) -> dict[str, Any]:
    """Both fleets side by side, driven in turn: a slow spell of the machine lands on a round of
    each, not on every run of one."""
    shared_url = postgres.fresh_database("sluicegate_bench_fleet_shared")
    own_url = postgres.fresh_database("sluicegate_bench_fleet_own")
    if not (shared_url and own_url):
        return {"skipped": "PostgreSQL is not reachable"}
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {
        "shared": {"c1": [], "c64": []},
        "own": {"c1": [], "c64": []},
    }
    commands: list[dict[str, float]] = []
    with ExitStack() as running:
        redis = Redis(workdir)
        redis.start()
        running.callback(redis.stop)
        fleets = [
            start_fleet(workdir, "shared", sim, shared_url, redis, running),
            start_fleet(workdir, "own", sim, own_url, None, running),
        ]
        for i in range(rounds):
            for fleet in fleets:
                label = f"fleet-{fleet.name}"
                runs[fleet.name]["c1"].append(
                    loadgen.run(
                        workdir,
                        f"{label}-c1-{i + 1}",
                        fleet.lb.url,
                        [*C1, "--model", MODEL, "--duration", f"{seconds}s"],
                        client_cpu,
                        fleet.key,
                    )
                )
                before = (redis.script_calls(), redis.commands()) if fleet.redis else None
                report = loadgen.run(
                    workdir,
                    f"{label}-c64-{i + 1}",
                    fleet.lb.url,
                    [*C64, "--model", MODEL, "--duration", f"{seconds}s"],
                    client_cpu,
                    fleet.key,
                )
                runs[fleet.name]["c64"].append(report)
                if before is not None:
                    requests = max(report["requests"], 1)
                    commands.append(
                        {
                            "scripts": (redis.script_calls() - before[0]) / requests,
                            "commands": (redis.commands() - before[1]) / requests,
                        }
                    )
    return summary(runs, commands)


def summary(
    runs: dict[str, dict[str, list[dict[str, Any]]]], commands: list[dict[str, float]]
) -> dict[str, Any]:
    def med(mode: str, level: str, pick: Any) -> float:
        return float(median(pick(r) for r in runs[mode][level]))

    rps = {m: med(m, "c64", lambda r: r["requests_per_s"]) for m in runs}
    p50 = {m: med(m, "c1", lambda r: r["total_ms"]["p50"]) for m in runs}
    errors = {m: sum(r.get("errors", 0) for lvl in runs[m].values() for r in lvl) for m in runs}
    return {
        "replicas": REPLICAS,
        "key_limits": KEY_LIMITS,
        "c64_requests_per_s": rps,
        "throughput_shared_vs_own": round(rps["shared"] / rps["own"], 3) if rps["own"] else None,
        "c1_p50_ms": p50,
        "added_p50_ms": round(p50["shared"] - p50["own"], 3),
        "redis_scripts_per_request_c64": round(median(c["scripts"] for c in commands), 4),
        "redis_commands_per_request_c64": round(median(c["commands"] for c in commands), 4),
        "errors": errors,
        "rounds": {m: {lvl: len(v) for lvl, v in runs[m].items()} for m in runs},
    }


def markdown(data: dict[str, Any]) -> str:
    if "skipped" in data:
        return f"## Fleet\n\nSkipped: {data['skipped']}."
    rps, p50 = data["c64_requests_per_s"], data["c1_p50_ms"]
    return "\n".join(
        [
            f"## Fleet: {data['replicas']} replicas behind HAProxy, one PostgreSQL",
            "",
            "The key has RPM, TPM, concurrency and a token quota, none of them reached. `shared`:",
            "limits shared through Redis; `own`: each replica limits on its own (no Redis).",
            "",
            "| | shared | own | target |",
            "|---|---:|---:|---|",
            f"| c=64 req/s | {rps['shared']:.0f} | {rps['own']:.0f} | "
            f"shared/own {data['throughput_shared_vs_own']} (>= 0.9) |",
            f"| c=1 p50 ms | {p50['shared']:.3f} | {p50['own']:.3f} | "
            f"added {data['added_p50_ms']:+.3f} ms (<= 0.1) |",
            f"| Redis scripts / request, c=64 | {data['redis_scripts_per_request_c64']} | - | "
            "(<= 0.1) |",
            f"| Redis commands / request, c=64 | {data['redis_commands_per_request_c64']} | - | "
            "(<= 0.1) |",
            f"| errors | {data['errors']['shared']} | {data['errors']['own']} | 0 |",
        ]
    )


def run_with_sim(
    workdir: Path, seconds: int, rounds: int, client_cpu: int | None
) -> dict[str, Any]:
    """`run` against an instant simulator of its own."""
    sim, address = start_instant_sim(workdir, client_cpu)
    try:
        return run(workdir, address, seconds, rounds, client_cpu)
    finally:
        sim.stop()


def main() -> int:
    """`python -m bench.fleet [--quick]`: the fleet scenario alone, to bench/results/fleet.*."""
    quick = "--quick" in sys.argv[1:]
    _, client_cpu = cpus()
    with tempfile.TemporaryDirectory(prefix="sluicegate-bench-fleet-") as tmp:
        data = run_with_sim(Path(tmp), 3 if quick else 8, 2 if quick else 3, client_cpu)
    write_results("fleet-quick" if quick else "fleet", data, markdown(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
