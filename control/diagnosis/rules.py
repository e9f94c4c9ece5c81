"""The doctor's rules. Each compares a pool's recent window with the baseline just before it and
lists its checks with the numbers; a rule matches when every check holds.

- compute_short: P50 rising with P95 and P99 -> upstream compute is short.
- not_compute: queue near its limit for a sustained period, P95 over a route's SLO, throughput no
  longer rising with in-flight -> the bottleneck is not compute.
- queueing: P99 pulling away from P95 (or sitting in the gateway's queue) and rising with traffic
  while P50 holds -> queueing/scheduling.
- backlog: TTFT rising while success looks normal, with rising client retries or upstream
  timeouts -> a backlog is building.

"P50" in the comparisons is the upstream P50: the latency's P50 less the P50 of the gateway's own
queue wait, so that waiting for admission is not read as slower compute.
"""

from __future__ import annotations

from collections.abc import Callable

from control.diagnosis.figures import PoolView
from control.diagnosis.schemas import SCALE_ADVICE, Check, RuleName, RuleResult
from control.diagnosis.settings import DoctorSettings

# The windows' percentiles have about 9% resolution: a change in the upstream P50 smaller than
# this share of the queue wait taken out of it is not a change.
RESOLUTION = 0.1


def ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f} ms" if value < 10 else f"{value:.0f} ms"


def pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def per_s(value: float) -> str:
    return f"{value:.1f}/s"


def rises(s: DoctorSettings, now: float | None, before: float | None, slack: float = 0.0) -> bool:
    """`now` reached rise_ratio x `before` and grew by at least min_rise_ms (+ slack)."""
    if now is None or before is None:
        return False
    return now >= s.rise_ratio * before and now - before >= s.min_rise_ms + slack


def _rise_words(s: DoctorSettings, slack: float = 0.0) -> str:
    extra = f", +{ms(slack)} for the resolution of the queue wait" if slack >= 1 else ""
    return f"a rise is x{s.rise_ratio:g} and +{s.min_rise_ms:g} ms{extra}"


def _slack(v: PoolView) -> float:
    return RESOLUTION * (v.recent.queue_wait_ms.p50 or 0.0)


def _name(v: PoolView) -> str:
    return "TTFT" if v.latency == "ttft_ms" else "total time"


def _upstream_p50(v: PoolView, s: DoctorSettings) -> Check:
    slack = _slack(v)
    held = rises(s, v.recent.upstream_p50_ms, v.baseline.upstream_p50_ms, slack)
    return Check(
        name="upstream_p50_rises",
        held=held,
        detail=f"P50 of {_name(v)} less the gateway's queue wait: "
        f"{ms(v.recent.upstream_p50_ms)}, was {ms(v.baseline.upstream_p50_ms)} "
        f"({_rise_words(s, slack)})",
    )


def _percentile_rises(v: PoolView, s: DoctorSettings, p: str) -> Check:
    now = getattr(v.recent.latency_ms, p)
    before = getattr(v.baseline.latency_ms, p)
    return Check(
        name=f"{p}_rises",
        held=rises(s, now, before),
        detail=f"{p.upper()} of {_name(v)}: {ms(now)}, was {ms(before)} ({_rise_words(s)})",
    )


def compute_short(v: PoolView, s: DoctorSettings) -> RuleResult:
    checks = [_upstream_p50(v, s), _percentile_rises(v, s, "p95"), _percentile_rises(v, s, "p99")]
    return _result(
        "compute_short",
        "upstream compute is short",
        "scale the model servers (more replicas or faster hardware for this pool)",
        checks,
    )


def _traffic_rises(v: PoolView, s: DoctorSettings) -> Check:
    now, before = v.recent.arrival_per_s, v.baseline.arrival_per_s
    return Check(
        name="traffic_rises",
        held=now >= s.traffic_rise_ratio * before and now > 0,
        detail=f"arrivals {per_s(now)}, were {per_s(before)} (a rise is x{s.traffic_rise_ratio:g})",
    )


def _tail_pulls_away(v: PoolView, s: DoctorSettings) -> Check:
    lat, wait = v.recent.latency_ms, v.recent.queue_wait_ms
    spread = lat.p99 is not None and lat.p95 is not None and lat.p99 >= s.tail_ratio * lat.p95
    queued = (
        lat.p95 is not None
        and wait.p95 is not None
        and lat.p95 > 0
        and wait.p95 >= s.queue_share * lat.p95
    )
    return Check(
        name="tail_pulls_away",
        held=spread or queued,
        detail=f"P99 {ms(lat.p99)} against P95 {ms(lat.p95)} (pulls away at x{s.tail_ratio:g}); "
        f"the gateway's queue wait at P95 is {ms(wait.p95)} "
        f"(counts from {s.queue_share:g} of P95)",
    )


def queueing(v: PoolView, s: DoctorSettings) -> RuleResult:
    upstream = _upstream_p50(v, s)
    holds = Check(name="upstream_p50_holds", held=not upstream.held, detail=upstream.detail)
    checks = [_percentile_rises(v, s, "p99"), _traffic_rises(v, s), _tail_pulls_away(v, s), holds]
    limit = v.pool.inflight_limit
    return _result(
        "queueing",
        "queueing/scheduling",
        f"raise the pool's concurrency (admission.max_inflight, now {limit or 'unlimited'}) or "
        "separate priorities; adding upstream compute will not help",
        checks,
    )


def _queue_sustained(v: PoolView, s: DoctorSettings) -> Check:
    needed = s.queue_sustained_fraction * v.slots
    return Check(
        name="queue_near_limit_sustained",
        held=v.slots > 0 and v.near_slots >= needed,
        detail=f"the queue was near its limit in {v.near_slots} of {v.slots} 10-second slots "
        f"(highest {v.recent.max_queue_depth} of {v.queue_limit}, {v.recent.rejected} refused; "
        f"near from {s.queue_near_fraction:g} of the limit, sustained from "
        f"{s.queue_sustained_fraction:g} of the slots)",
    )


def _over_slo(v: PoolView) -> Check:
    over = [
        o for o in v.objectives if o.ttft_p95_ms is not None and o.ttft_p95_ms > o.slo_ttft_p95_ms
    ]
    words = ", ".join(
        f"{o.route} {ms(o.ttft_p95_ms)} against {o.slo_ttft_p95_ms} ms" for o in v.objectives
    )
    return Check(name="p95_over_slo", held=bool(over), detail=f"P95 of TTFT per route: {words}")


def _throughput_flat(v: PoolView, s: DoctorSettings) -> Check:
    r, b = v.recent, v.baseline
    detail = (
        f"served {per_s(r.served_per_s)} at up to {r.max_inflight} in flight, "
        f"was {per_s(b.served_per_s)} at up to {b.max_inflight}"
    )
    if b.max_inflight == 0 or r.max_inflight == 0:
        return Check(name="throughput_flat_with_inflight", held=False, detail=detail)
    grew = r.max_inflight > b.max_inflight
    per_now, per_before = r.served_per_s / r.max_inflight, b.served_per_s / b.max_inflight
    flat = per_now <= s.throughput_per_inflight_drop * per_before
    return Check(
        name="throughput_flat_with_inflight",
        held=grew and flat,
        detail=f"{detail}: {per_now:.2f}/s per request in flight, was {per_before:.2f}/s "
        f"(flat when in flight grew and this fell to {s.throughput_per_inflight_drop:g} or less)",
    )


def not_compute(v: PoolView, s: DoctorSettings) -> RuleResult:
    checks = [_queue_sustained(v, s), _throughput_flat(v, s)]
    if v.objectives:
        checks.insert(1, _over_slo(v))
    result = _result(
        "not_compute",
        "the bottleneck is not compute",
        "look at the scheduler, memory (KV cache, preemption) or downstream (slow readers); "
        "neither more concurrency nor more model servers will help",
        checks,
    )
    if not v.objectives:
        result.matched = False
        result.not_evaluated = "no route served by this pool has an SLO (slo_ttft_p95_ms)"
    return result


def backlog(v: PoolView, s: DoctorSettings) -> RuleResult:
    p50, p95 = _percentile_rises(v, s, "p50"), _percentile_rises(v, s, "p95")
    rising = Check(
        name="latency_rises",
        held=p50.held or p95.held,
        detail=f"{p50.detail}; {p95.detail}",
    )
    normal = Check(
        name="success_normal",
        held=v.recent_failure_rate <= s.normal_error_rate,
        detail=f"errors other than timeouts, refusals included: {pct(v.recent_failure_rate)} "
        f"(normal up to {pct(s.normal_error_rate)})",
    )
    r, b = v.recent, v.baseline
    retries = r.client_retry_share >= s.min_retry_share and (
        r.client_retry_share >= s.rise_ratio * b.client_retry_share
    )
    timeouts = r.timeout_rate >= s.min_timeout_rate
    pressure = Check(
        name="retries_or_timeouts",
        held=retries or timeouts,
        detail=f"client retries {pct(r.client_retry_share)} of requests, were "
        f"{pct(b.client_retry_share)} (count from {pct(s.min_retry_share)} and x{s.rise_ratio:g}); "
        f"upstream timeouts {pct(r.timeout_rate)} (count from {pct(s.min_timeout_rate)})",
    )
    return _result(
        "backlog",
        "a backlog is building",
        "requests pile up faster than they finish: shed or slow arrivals (rate limits, smaller "
        "queues, shorter deadlines) before client retries amplify it, and add capacity",
        [rising, normal, pressure],
    )


def _result(rule: RuleName, title: str, advice: str, checks: list[Check]) -> RuleResult:
    return RuleResult(
        rule=rule,
        matched=all(c.held for c in checks),
        scale_advice=SCALE_ADVICE[rule],
        title=title,
        advice=advice,
        checks=checks,
    )


# In order of precedence: the first rule that matches is the verdict.
RULES: tuple[Callable[[PoolView, DoctorSettings], RuleResult], ...] = (
    compute_short,
    not_compute,
    queueing,
    backlog,
)
