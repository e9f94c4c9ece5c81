"""The data plane alone, as the "usage off" baseline: the same route, pool and key checks as the
benchmarked `serve`, every request's usage event produced and handed out by `drain_usage` (the
relay as its issue scopes it), but dropped there: no SQL and no admin API. Comparing it with
`serve` prices usage accounting on the request path.

`python -m bench.bare_core SIM_ADDRESS [JOURNAL_DIR]` prints `listening on http://ADDR key KEY`
and serves until SIGTERM. With a journal directory the core journals every event (as `serve`
does), and the events drained are acknowledged (so the journal is pruned as in `serve`): the
journal's own share of the cost.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from typing import Any

from sluicegate import _core

from bench.gateway import MODEL, SIM_HEADERS
from control.process.settings import UsageSettings

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
                    "members": [
                        {
                            "id": "sim",
                            "kind": "openai",
                            "base_url": f"http://{sim}/v1",
                            "forward_headers": SIM_HEADERS,
                        }
                    ],
                }
            ],
            "routes": [{"alias": MODEL, "chain": [{"pool": "pool", "model": "sim-model"}]}],
        }
    )


def last_seq(batch: bytes) -> int | None:
    """The sequence number of a drained batch's last event (`seq` is each event's first field),
    without parsing the batch: this process stands for "no usage accounting"."""
    at = batch.rfind(b'{"seq":')
    if at < 0:
        return None
    digits = batch[at + 7 : batch.index(b",", at)]
    return int(digits)


def drop_events(core: Any, journaled: bool, stop: threading.Event) -> None:
    """Take events as `serve`'s drainer does (batches of `usage.drain_batch`, a linger of
    `usage.drain_linger_ms` after each unless a full batch waits, at their defaults), without
    storing them. Without the linger the data plane would wake this thread for nearly every
    event, a futex call and a context switch each."""
    usage = UsageSettings()
    while not stop.is_set():
        batch = core.drain_usage(usage.drain_batch, usage.drain_timeout_ms)
        seq = last_seq(batch)
        if journaled and seq is not None:
            core.ack_usage(seq)
        if seq is not None and core.usage_backlog < usage.drain_batch:
            stop.wait(usage.drain_linger_ms / 1000)


def main() -> int:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    journal = sys.argv[2] if len(sys.argv) > 2 else None
    core = _core.Core(
        workers=1, max_connections=20_000, max_connections_per_client=0, journal_dir=journal
    )
    key = _core.generate_api_key()
    core.apply_config(1, payload(sys.argv[1], key))
    dropper = threading.Thread(target=drop_events, args=(core, journal is not None, stop))
    dropper.start()
    address = core.start("127.0.0.1:0")
    print(f"listening on http://{address} key {key}", flush=True)
    stop.wait()
    core.stop(5)
    dropper.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
