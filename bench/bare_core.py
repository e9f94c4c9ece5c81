"""The data plane alone, as the "usage off" baseline: the same route, pool and key checks as the
benchmarked `serve`, but no journal, no drainer, no SQL and no admin API. Events stay in the
core's memory (the backlog bound is raised for the run). Comparing it with `serve` prices usage
accounting on the request path.

`python -m bench.bare_core SIM_ADDRESS [JOURNAL_DIR]` prints `listening on http://ADDR key KEY`
and serves until SIGTERM. With a journal directory the core journals every event (as `serve`
does) but nothing drains it: the journal's own share of the cost.
"""

from __future__ import annotations

import json
import signal
import sys
import threading

from sluicegate import _core

from bench.gateway import MODEL

PEPPER = "bench-pepper-0123456789abcdef"


def payload(sim: str, key: str) -> str:
    return json.dumps(
        {
            "auth": {"key_pepper": PEPPER},
            "tenants": [{"id": "bench"}],
            "keys": [
                {
                    "id": "bench-key",
                    "tenant_id": "bench",
                    "hash": _core.hash_api_key(PEPPER, key),
                    "prefix": _core.api_key_prefix(key),
                }
            ],
            "pools": [
                {
                    "id": "pool",
                    "members": [{"id": "sim", "kind": "openai", "base_url": f"http://{sim}/v1"}],
                }
            ],
            "routes": [{"alias": MODEL, "chain": [{"pool": "pool", "model": "sim-model"}]}],
        }
    )


def main() -> int:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    journal = sys.argv[2] if len(sys.argv) > 2 else None
    core = _core.Core(
        workers=1, max_connections=20_000, usage_backlog_limit=10_000_000, journal_dir=journal
    )
    key = _core.generate_api_key()
    core.apply_config(1, payload(sys.argv[1], key))
    address = core.start("127.0.0.1:0")
    print(f"listening on http://{address} key {key}", flush=True)
    stop.wait()
    core.stop(5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
