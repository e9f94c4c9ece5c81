"""The doctor: reads the core's windows the settings name (recent, the baseline before it, and
the recent window's 10-second slots), applies the rules per pool, and says the verdict in plain
words with the numbers behind it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy.orm import Session

from control.api.caller import Caller
from control.api.errors import Validation
from control.bridge.core_bridge import CoreBridge
from control.context import ControlContext
from control.diagnosis.figures import BASELINE, RECENT, SLOT, PoolView, pool_view
from control.diagnosis.rules import RULES, ms, pct, per_s
from control.diagnosis.schemas import (
    SCALE_ADVICE,
    DiagnosisOut,
    PoolDiagnosis,
    RuleResult,
    Verdict,
)
from control.diagnosis.settings import HISTORY_SECONDS, SLOT_SECONDS, DoctorSettings
from control.routes import repository as routes
from control.status.schemas import WindowSpec
from control.status.source import peer_readings, read_fleet_status
from control.timeutil import utcnow


def doctor_windows(s: DoctorSettings) -> list[WindowSpec]:
    recent = s.recent_seconds
    windows = [
        WindowSpec(name=RECENT, seconds=recent, ends_seconds_ago=0),
        WindowSpec(name=BASELINE, seconds=s.baseline_seconds, ends_seconds_ago=recent),
    ]
    windows += [
        WindowSpec(name=f"{SLOT}{i}", seconds=SLOT_SECONDS, ends_seconds_ago=i * SLOT_SECONDS)
        for i in range(recent // SLOT_SECONDS)
    ]
    return windows


def _figures(v: PoolView) -> str:
    r, b = v.recent.latency_ms, v.baseline.latency_ms
    name = "TTFT" if v.latency == "ttft_ms" else "total time"
    limit = v.pool.inflight_limit
    lanes = ", ".join(f"{lane} {n}" for lane, n in sorted(v.pool.queue_limit.items()))
    return (
        f"{per_s(v.recent.served_per_s)} served, {v.recent.rejected} refused; {name} "
        f"P50/P95/P99 {ms(r.p50)}/{ms(r.p95)}/{ms(r.p99)} (before {ms(b.p50)}/{ms(b.p95)}/"
        f"{ms(b.p99)}); errors {pct(v.recent.error_rate)}, timeouts {pct(v.recent.timeout_rate)}; "
        f"queue up to {v.recent.max_queue_depth} of {v.queue_limit} ({lanes}), in flight up to "
        f"{v.recent.max_inflight} of {limit if limit is not None else 'no limit'}"
    )


def _evidence(rule: RuleResult) -> str:
    return "; ".join(c.detail for c in rule.checks if c.held)


def diagnose_pool(v: PoolView, s: DoctorSettings) -> PoolDiagnosis:
    rules: list[RuleResult] = []
    verdict: Verdict
    if v.recent.requests < s.min_requests:
        verdict = "idle"
        summary = (
            f"too little traffic to judge: {v.recent.requests} requests finished in the last "
            f"{s.recent_seconds} s (the doctor needs {s.min_requests})"
        )
    elif v.baseline.requests < s.min_requests:
        verdict = "no_baseline"
        summary = (
            f"nothing to compare with: {v.baseline.requests} requests finished in the "
            f"{s.baseline_seconds} s before the last {s.recent_seconds} s (the doctor needs "
            f"{s.min_requests}); now {_figures(v)}"
        )
    else:
        rules = [rule(v, s) for rule in RULES]
        matched = [r for r in rules if r.matched]
        if matched:
            first = matched[0]
            verdict = first.rule
            summary = (
                f"{first.title}: {_evidence(first)}. Advice: {first.advice}. Now {_figures(v)}"
            )
        else:
            verdict = "healthy"
            summary = f"healthy: {_figures(v)}"
    return PoolDiagnosis(
        pool=v.pool.id,
        verdict=verdict,
        scale_advice=SCALE_ADVICE[verdict],
        summary=summary,
        latency=v.latency,
        recent=v.recent,
        baseline=v.baseline,
        queue_limit=v.queue_limit,
        inflight_limit=v.pool.inflight_limit,
        queue_near_slots=v.near_slots,
        slots=v.slots,
        objectives=v.objectives,
        rules=rules,
    )


def diagnose(
    bridge: CoreBridge, session: Session, s: DoctorSettings, peers: Sequence[str] = ()
) -> DiagnosisOut:
    """The verdict per pool, on the fleet's figures: this replica's reading merged with its
    `peers`' (what the other live replicas published for the same windows)."""
    core = read_fleet_status(bridge, doctor_windows(s), list(peers))
    slos = routes.objectives(session)
    pools = [diagnose_pool(pool_view(p, core.routes, slos, s), s) for p in core.pools]
    return DiagnosisOut(
        at=datetime.fromtimestamp(core.now, UTC) if core.now else utcnow(),
        recent_seconds=s.recent_seconds,
        baseline_seconds=s.baseline_seconds,
        thresholds=s,
        pools=pools,
    )


def fleet_peers(ctx: ControlContext, s: DoctorSettings) -> list[str]:
    """The readings the other live replicas published for the doctor's windows `s` names."""
    return peer_readings(
        ctx.sessions, ctx.replica.id, ctx.settings.fleet.dead_after_ms, doctor_windows(s)
    )


def diagnosis(
    ctx: ControlContext,
    session: Session,
    caller: Caller,
    settings: DoctorSettings,
    recent_seconds: int | None = None,
    baseline_seconds: int | None = None,
) -> DiagnosisOut:
    """Admin only. The windows may be chosen per call; the thresholds are the settings'."""
    caller.require_admin()
    chosen = settings.model_dump()
    if recent_seconds is not None:
        chosen["recent_seconds"] = recent_seconds
    if baseline_seconds is not None:
        chosen["baseline_seconds"] = baseline_seconds
    if chosen["recent_seconds"] + chosen["baseline_seconds"] > HISTORY_SECONDS:
        field = "baseline_seconds" if baseline_seconds is not None else "recent_seconds"
        raise Validation.field(
            field, "recent_seconds + baseline_seconds must be at most 3600 (the core keeps an hour)"
        )
    doctor = DoctorSettings.model_validate(chosen)
    return diagnose(ctx.bridge, session, doctor, fleet_peers(ctx, doctor))
