"""The load generator's own overhead: what it measures of the simulator directly, against the
TTFT and inter-token gap the simulator is configured with. Whatever it adds here it also adds to
every other figure, so comparisons between targets cancel it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import loadgen
from bench.procs import sluicegate, start, wait_for_line

TTFT_MS = 50.0
ITL_MS = 10.0


def run(workdir: Path, seconds: int, cpu: int | None) -> dict[str, Any]:
    sim = start(
        "sim-calibration",
        sluicegate(
            "sim",
            "--port",
            "0",
            "--ttft-ms",
            f"fixed:{TTFT_MS}",
            "--itl-ms",
            f"fixed:{ITL_MS}",
            "--workers",
            "1",
        ),
        workdir,
        cpu,
    )
    try:
        address = wait_for_line(sim, r"listening on http://(\S+)").group(1)
        args = [
            "--stream-ratio",
            "1",
            "--prompt-tokens",
            "fixed:100",
            "--output-tokens",
            "fixed:20",
            "--concurrency",
            "8",
            "--duration",
            f"{seconds}s",
            "--model",
            "sim-model",
        ]
        report = loadgen.run(workdir, "calibration", f"http://{address}", args, cpu)
    finally:
        sim.stop()
    ttft, gap = report["ttft_ms"], report["gap_ms"]
    return {
        "configured_ttft_ms": TTFT_MS,
        "configured_itl_ms": ITL_MS,
        "measured_ttft_ms": {"p50": ttft["p50"], "p99": ttft["p99"]},
        "measured_gap_ms": {"p50": gap["p50"], "p99": gap["p99"]},
        "ttft_overhead_p50_ms": (ttft["p50"] or 0.0) - TTFT_MS,
        "gap_overhead_p50_ms": (gap["p50"] or 0.0) - ITL_MS,
    }
