"""From the core's windows to the figures the rules read: arrival and service rates, the latency
judged (TTFT, or total time without enough streams), the gateway's queue wait and what is left
of P50 once that wait is taken out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from control.diagnosis.schemas import Percentiles, RouteObjective, WindowFigures
from control.diagnosis.settings import DoctorSettings
from control.status.schemas import PoolStatus, Quantiles, RouteStatus, WindowStats

Latency = Literal["ttft_ms", "total_ms"]

RECENT = "recent"
BASELINE = "baseline"
SLOT = "slot"


def _percentiles(q: Quantiles) -> Percentiles:
    return Percentiles(p50=q.p50, p95=q.p95, p99=q.p99)


def window_figures(w: WindowStats, latency: Latency) -> WindowFigures:
    # `rate_per_s` is divided by the time the window actually covers (its newest slot is partly
    # elapsed): recover that time to put the refusals on the same footing.
    covered = w.requests / w.rate_per_s if w.rate_per_s > 0 else float(w.seconds)
    lat = w.ttft_ms if latency == "ttft_ms" else w.total_ms
    upstream = None
    if lat.p50 is not None:
        upstream = max(0.0, lat.p50 - (w.queue_wait_ms.p50 or 0.0))
    return WindowFigures(
        seconds=w.seconds,
        requests=w.requests,
        rejected=w.rejected,
        arrival_per_s=(w.requests + w.rejected) / covered if covered > 0 else 0.0,
        served_per_s=w.rate_per_s,
        error_rate=w.error_rate,
        timeout_rate=w.timeout_rate,
        client_retry_share=w.client_retries / w.requests if w.requests else 0.0,
        latency_ms=_percentiles(lat),
        queue_wait_ms=_percentiles(w.queue_wait_ms),
        upstream_p50_ms=upstream,
        max_queue_depth=w.max_queue_depth,
        max_inflight=w.max_inflight,
    )


@dataclass(frozen=True)
class PoolView:
    """What the rules see of one pool."""

    pool: PoolStatus
    latency: Latency
    recent: WindowFigures
    baseline: WindowFigures
    # Errors other than timeouts, admission refusals included, per request that arrived.
    recent_failure_rate: float
    queue_limit: int
    near_slots: int
    slots: int
    objectives: list[RouteObjective]


def _near_limit(slot: WindowStats, queue_limit: int, s: DoctorSettings) -> bool:
    near = queue_limit > 0 and slot.max_queue_depth >= s.queue_near_fraction * queue_limit
    return near or slot.rejected > 0


def pool_view(
    pool: PoolStatus, routes: list[RouteStatus], slos: dict[str, int], s: DoctorSettings
) -> PoolView:
    recent, baseline = pool.windows[RECENT], pool.windows[BASELINE]
    # TTFT when the windows have enough streams to judge it (a baseline too quiet to be judged at
    # all does not count), else the total time of every request.
    streams = recent.ttft_ms.n >= s.min_requests and (
        baseline.ttft_ms.n >= s.min_requests or baseline.requests < s.min_requests
    )
    latency: Latency = "ttft_ms" if streams else "total_ms"
    queue_limit = sum(pool.queue_limit.values())
    slots = [w for name, w in pool.windows.items() if name.startswith(SLOT)]
    arrived = recent.requests + recent.rejected
    failures = recent.errors - recent.timeouts + recent.rejected
    objectives = [
        RouteObjective(
            route=route.alias,
            slo_ttft_p95_ms=slos[route.alias],
            ttft_p95_ms=route.windows[RECENT].ttft_ms.p95,
        )
        for route in routes
        if pool.id in route.chain and route.alias in slos
    ]
    return PoolView(
        pool=pool,
        latency=latency,
        recent=window_figures(recent, latency),
        baseline=window_figures(baseline, latency),
        recent_failure_rate=failures / arrived if arrived else 0.0,
        queue_limit=queue_limit,
        near_slots=sum(_near_limit(slot, queue_limit, s) for slot in slots),
        slots=len(slots),
        objectives=objectives,
    )
