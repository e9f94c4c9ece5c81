"""A stream the gateway dies in is billed what it had relayed, not just its prompt: `serve` is
killed with SIGKILL five times under streaming load (16 concurrent streams of 40-token answers,
as an operator restarting a gateway would meet them) and started again on the same journal and
database. Per request, the billed completion tokens are compared with the content events its
client received (counted from the stream as it arrived): never more, and at most the bound of
ARCHITECTURE.md's billing policy fewer; nothing lost or doubled against the simulator's record.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path

from tests.e2e.helpers import UPSTREAM_SECRET
from tests.e2e.ledger import (
    BODY,
    Load,
    Serve,
    compare,
    compare_received,
    ledger,
    set_up,
    write_config,
)
from tests.support.jsonl import whole_lines
from tests.support.procs import Proc

KILLS = 5
TOKENS = 40
# ARCHITECTURE.md, billing policy: a progress record every 16 content events at most one commit
# interval (10 ms) apart, counting the events before the frame being relayed. The simulator
# sends one event every 5 ms (two per interval) and one per frame, so an interrupted stream is
# billed at most 16 + 2 (an interval's events past the sixteenth) + 1 (the frame in flight)
# short of what its client received.
BOUND = 16 + 2 + 1


def test_kill_9_bills_each_stream_what_its_client_received(
    tmp_path: Path, sim_factory: Callable[..., Proc]
) -> None:
    rng = random.Random()
    record = tmp_path / "sim.jsonl"
    sim = sim_factory(
        "--api-key", UPSTREAM_SECRET, "--ttft-ms", "20", "--itl-ms", "5", "--record", str(record)
    )  # fmt: skip
    database_url = f"sqlite:///{tmp_path}/sluicegate.db"
    serve = Serve(tmp_path, write_config(tmp_path, database_url))
    serve.start()
    body = {**BODY, "max_tokens": TOKENS}
    load = Load(serve, set_up(serve, sim.address), threads=16, body=body)
    load.start()
    for _ in range(KILLS):
        if serve.url is None:
            serve.start()
        # Past the first progress record of the streams under way (a stream takes ~220 ms).
        time.sleep(rng.uniform(0.4, 1.2))
        serve.kill()
    serve.start()
    time.sleep(0.5)
    load.stop()
    assert serve.terminate() == 0
    sim.stop()

    rows = ledger(database_url)
    counts = compare(rows, whole_lines(record))
    worst = compare_received(rows, load.received, BOUND)
    print(f"kill -9 x{KILLS}: {counts}, client side {dict(load.outcomes)}, worst shortfall {worst}")
    assert counts["complete"] > 50 and counts["interrupted"] > 0
    # The progress records did their work: streams killed past their sixteenth event were billed
    # for what they relayed.
    assert counts.get("interrupted_with_progress", 0) > 0, counts
