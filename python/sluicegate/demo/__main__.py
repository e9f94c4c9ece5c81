"""`make demo`: the whole product on one machine, every figure measured in this run.

Two simulated model servers (recording what they served), `sluicegate serve` in front of them
with its admin API and SQLite ledger, a tenant key made through the admin API, a burst of mixed
traffic from the load generator, a fallback drill under load, then the key's usage and latency
from the ledger, checked against the simulators' own record, and `sluicegate status` / `doctor`.
It ends with the console's address and the admin token to sign in with.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sluicegate.cli.client import AdminClient
from sluicegate.demo.config import SHAPE, SIMS, SLOTS, config
from sluicegate.demo.processes import processes
from sluicegate.demo.traffic import bench, drill_under_load, mix, record_totals, wait_for_ledger


def step(text: str) -> None:
    print(f"\n== {text}", flush=True)


def main() -> int:
    started = time.monotonic()
    token = "demo-" + secrets.token_hex(16)
    with tempfile.TemporaryDirectory(prefix="sluicegate-demo-") as tmp, processes(Path(tmp)) as p:
        workdir = Path(tmp)
        step("three simulated model servers, recording every request they serve")
        records, sims = [], {}
        for name, timing in SIMS.items():
            record = workdir / f"{name}.jsonl"
            records.append(record)
            log = p.start(
                name,
                "sim",
                "--port",
                "0",
                "--max-concurrency",
                str(SLOTS[name]),
                "--record",
                str(record),
                *timing,
            )
            sims[name] = p.wait_for(log, r"listening on http://(\S+)").group(1)
            print(f"  {name}: http://{sims[name]} ({' '.join(timing)}, {SLOTS[name]} slots)")

        step("sluicegate serve: data plane, admin API, SQLite ledger")
        path, data, admin_address = config(workdir, sims)
        env = {"SLUICEGATE_ADMIN_TOKEN": token, "SLUICEGATE_ADMIN_URL": f"http://{admin_address}"}
        log = p.start("serve", "serve", "--config", str(path), env=env)
        p.wait_for(log, r"listening on http://\S+ \(admin http://\S+\)")
        url = f"http://{data}"
        print(f"  gateway {url}, admin http://{admin_address}")
        print(f"  console http://{admin_address}/console (watch the load live; the token is below)")
        print("  route demo-chat -> pool chat (sim-a, sim-b) -> pool chat-fallback (sim-spare)")

        step("a key for tenant acme, made through the admin API")
        admin = AdminClient(f"http://{admin_address}", token)
        created = admin.call("POST", "/v1/admin/keys", {"tenant_id": "acme", "name": "demo"})
        key, key_id = created["key"], created["id"]
        print(f"  key {created['prefix']}... (id {key_id}); the secret is shown once")

        step("steady load: 12 clients for 20 s (the pool has 24 slots), 80% streaming")
        steady_args = [*SHAPE, *mix(3, 1), "--concurrency", "12", "--duration", "20s", "--quiet"]
        steady = bench(url, key, steady_args, workdir / "steady.json")

        step("fallback drill: sim-a ejected for 6 s under load")
        drill = drill_under_load(p, url, key, env)
        print(
            f"  during the drill: {drill['requests']} requests, {drill['ok']} ok, "
            f"error rate {drill['error_rate']:.2%}, timeout rate {drill['timeout_rate']:.2%}"
        )

        step("overload: 26 requests/s for 30 s (the slots serve about 21), batch:interactive 3:1")
        overload_args = [*SHAPE, *mix(1, 3), "--rate", "26", "--duration", "30s", "--quiet"]
        burst = bench(url, key, overload_args, workdir / "burst.json")
        shed = burst["status"].get("503", 0)
        print(
            f"  {shed} of {burst['requests']} shed with 503 + Retry-After "
            f"({burst['retry_after_seen']} carried it); {burst['ok']} served"
        )

        step("the ledger: the key's usage in SQL against what the simulators served")
        served = steady["ok"] + drill["ok"] + burst["ok"]
        totals = wait_for_ledger(admin, key_id, served)
        upstream, prompt, completion = record_totals(records)
        t = totals["total"]
        print(f"  {'':20} {'requests':>9} {'prompt':>9} {'completion':>11} {'cost (USD)':>11}")
        for m in totals["models"]:
            cost = m["cost_micros"] / 1e6
            print(
                f"  ledger {m['model']:13} {m['requests']:>9} {m['prompt_tokens']:>9} "
                f"{m['completion_tokens']:>11} {cost:>11.4f}"
            )
        print(f"  {'simulators served':20} {upstream:>9} {prompt:>9} {completion:>11}")
        agree = (t["requests"], t["prompt_tokens"], t["completion_tokens"]) == (
            upstream,
            prompt,
            completion,
        )
        print(f"  ledger equals the simulators' record: {'yes' if agree else 'NO'}")
        latency = admin.call("GET", f"/v1/admin/keys/{key_id}/usage/latency")
        for name in ("ttft_ms", "tpot_ms"):
            q = latency[name]
            print(
                f"  key {name[:-3].upper():5} p50 {q['p50']:.1f} ms  p95 {q['p95']:.1f} ms  "
                f"p99 {q['p99']:.1f} ms  ({q['count']} requests)"
            )

        step("sluicegate status")
        subprocess.run([sys.executable, "-m", "sluicegate", "status"], env={**os.environ, **env})
        step("sluicegate doctor")
        subprocess.run([sys.executable, "-m", "sluicegate", "doctor"], env={**os.environ, **env})

        ok = (
            agree
            and t["requests"] == served
            and all(r["error_rate"] == 0 for r in (steady, drill))
            and burst["ok"] + shed == burst["requests"]
        )
        print(f"\ndemo {'finished' if ok else 'FAILED'} in {time.monotonic() - started:.0f} s")
        console(admin_address, token)
    return 0 if ok else 1


def console(admin_address: str, token: str) -> None:
    """The last words: where the console is and how to sign in; the gateway stays up for it
    while a person is at the terminal (Enter stops it), or SLUICEGATE_DEMO_HOLD seconds."""
    step("the console: every figure above, in a browser")
    print(f"  open   http://{admin_address}/console")
    print(f"  token  {token}   (the demo's admin token: paste it into the sign-in form)")
    hold = os.environ.get("SLUICEGATE_DEMO_HOLD")
    try:
        if hold:
            print(f"  the gateway stays up for {hold} s", flush=True)
            time.sleep(float(hold))
        elif sys.stdin.isatty():
            input("  the gateway stays up for the console: press Enter to stop it ")
        else:
            print("  (in a terminal, or with SLUICEGATE_DEMO_HOLD=SECONDS, the gateway stays up)")
    except (EOFError, KeyboardInterrupt):
        pass


if __name__ == "__main__":
    sys.exit(main())
