"""Per-thread cost from /proc: CPU time and context switches of each thread of a process,
grouped by the thread's name, so that a phase can say what each part cost per request (the
core's request-path workers, the journal's syncer, the usage drainer and the rest) without a
profiler.

`sample(pid)` before and after a phase; `per_request(before, after, requests)` gives, per thread
group, microseconds of CPU and context switches (voluntary: the thread slept, a wake-up each;
involuntary: it was preempted) per request.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any

TICKS = os.sysconf("SC_CLK_TCK")
# The core names its threads (request-path workers, the journal's syncer) and so does the
# control plane (`control/process/thread_names.py`; the kernel keeps 15 bytes of a name): the
# usage drainer has a group of its own, its other jobs and the admin API are `other`.
GROUPS = {
    "sluicegate-core": "request_path",
    "sluicegate-jour": "journal_syncer",
    "sluicegate-usag": "drainer",
}


@dataclass(frozen=True)
class ThreadSample:
    name: str
    cpu_s: float
    voluntary: int
    involuntary: int


def group(name: str) -> str:
    for prefix, label in GROUPS.items():
        if name.startswith(prefix):
            return label
    return "other"


def sample(pid: int) -> dict[int, ThreadSample]:
    """Every live thread of `pid`: its name, user + system CPU and context switches so far."""
    out: dict[int, ThreadSample] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
            status = (task / "status").read_text()
        except OSError:
            continue  # the thread ended meanwhile
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat.rsplit(")", 1)[1].split()
        switches = {
            k: int(v)
            for k, v in (
                line.split(":", 1) for line in status.splitlines() if "ctxt_switches" in line
            )
        }
        out[int(task.name)] = ThreadSample(
            name,
            (int(fields[11]) + int(fields[12])) / TICKS,
            switches.get("voluntary_ctxt_switches", 0),
            switches.get("nonvoluntary_ctxt_switches", 0),
        )
    return out


def per_request(
    before: dict[int, ThreadSample], after: dict[int, ThreadSample], requests: int
) -> dict[str, Any]:
    """Per thread group: CPU microseconds and context switches per request over the phase
    (threads that started during it count from zero; those that ended are not seen)."""
    totals: dict[str, list[float]] = {}
    for tid, now in after.items():
        then = before.get(tid, ThreadSample(now.name, 0.0, 0, 0))
        row = totals.setdefault(group(now.name), [0.0, 0.0, 0.0, 0.0])
        row[0] += now.cpu_s - then.cpu_s
        row[1] += now.voluntary - then.voluntary
        row[2] += now.involuntary - then.involuntary
        row[3] += 1
    n = max(requests, 1)
    groups = {
        label: {
            "threads": int(threads),
            "cpu_us_per_request": round(cpu * 1e6 / n, 2),
            "voluntary_switches_per_request": round(vol / n, 4),
            "involuntary_switches_per_request": round(invol / n, 4),
        }
        for label, (cpu, vol, invol, threads) in sorted(totals.items())
    }
    every = [sum(v[i] for v in totals.values()) for i in range(3)]
    return {
        "requests": requests,
        "groups": groups,
        "cpu_us_per_request": round(every[0] * 1e6 / n, 2),
        "switches_per_request": round((every[1] + every[2]) / n, 4),
    }


def median_rounds(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The median over rounds of each figure `per_request` gives."""
    if not rounds:
        return {}
    labels = sorted({label for r in rounds for label in r["groups"]})
    groups = {}
    for label in labels:
        rows = [r["groups"][label] for r in rounds if label in r["groups"]]
        groups[label] = {
            field: median(float(row[field]) for row in rows)
            for field in (
                "cpu_us_per_request",
                "voluntary_switches_per_request",
                "involuntary_switches_per_request",
            )
        }
    return {
        "rounds": len(rounds),
        "groups": groups,
        "cpu_us_per_request": median(float(r["cpu_us_per_request"]) for r in rounds),
        "switches_per_request": median(float(r["switches_per_request"]) for r in rounds),
    }
