"""The doctor's rules on windows written out in the test: each regime is named with its evidence,
the precedence between rules holds, and the thresholds are the settings'. (The same rules on
windows a real data plane measured: test_doctor_regimes.py.)"""

from __future__ import annotations

from typing import Any

import pytest

from control.diagnosis.figures import pool_view
from control.diagnosis.schemas import PoolDiagnosis
from control.diagnosis.service import diagnose_pool, doctor_windows
from control.diagnosis.settings import DoctorSettings
from control.status.schemas import PoolStatus, RouteStatus, WindowStats

S = DoctorSettings(recent_seconds=20, baseline_seconds=30)
FAST = (43.0, 79.0, 102.0)


def q(p50: float | None, p95: float | None, p99: float | None, n: int = 100) -> dict[str, Any]:
    return {"n": n if p50 is not None else 0, "p50": p50, "p95": p95, "p99": p99}


def window(
    *,
    seconds: int,
    requests: int,
    ttft: tuple[float, float, float] = FAST,
    wait: tuple[float, float, float] = (0.05, 0.05, 0.05),
    rejected: int = 0,
    errors: int = 0,
    timeouts: int = 0,
    retries: int = 0,
    depth: int = 0,
    inflight: int = 2,
    streams: bool = True,
) -> WindowStats:
    return WindowStats.model_validate(
        {
            "seconds": seconds,
            "requests": requests,
            "rate_per_s": requests / seconds,
            "errors": errors,
            "error_rate": errors / requests if requests else 0.0,
            "timeouts": timeouts,
            "timeout_rate": timeouts / requests if requests else 0.0,
            "rejected": rejected,
            "client_retries": retries,
            "output_tokens_per_s": 8 * requests / seconds,
            "ttft_ms": q(*ttft, n=requests) if streams else q(None, None, None),
            "tpot_ms": q(5.0, 5.2, 5.5, n=requests) if streams else q(None, None, None),
            "total_ms": q(*(t + 35 for t in ttft), n=requests),
            "queue_wait_ms": q(*wait, n=requests),
            "max_queue_depth": depth,
            "max_inflight": inflight,
        }
    )


def pool(
    recent: WindowStats,
    baseline: WindowStats,
    *,
    near_slots: int = 0,
    inflight_limit: int | None = None,
    lanes: int = 8,
) -> PoolStatus:
    slots = {
        f"slot{i}": window(seconds=10, requests=1, depth=2 * lanes if i < near_slots else 0)
        for i in range(2)
    }
    return PoolStatus.model_validate(
        {
            "id": "p",
            "kind": "openai",
            "inflight": 0,
            "inflight_limit": inflight_limit,
            "queue_depth": {"interactive": 0, "batch": 0},
            "queue_limit": {"interactive": lanes, "batch": lanes},
            "drilled": False,
            "members": [
                {"id": "m", "state": "ready", "inflight": 0, "ejections": 0, "ttfb_ewma_ms": 40}
            ],
            "windows": {"recent": recent, "baseline": baseline, **slots},
        }
    )


def route(ttft_p95: float) -> RouteStatus:
    recent = window(seconds=20, requests=100, ttft=(ttft_p95 / 2, ttft_p95, ttft_p95))
    return RouteStatus(alias="chat", chain=["p"], windows={"recent": recent})


def diagnose(
    p: PoolStatus,
    *,
    slo: int | None = None,
    route_p95: float = 50.0,
    settings: DoctorSettings = S,
) -> PoolDiagnosis:
    slos = {"chat": slo} if slo is not None else {}
    return diagnose_pool(pool_view(p, [route(route_p95)], slos, settings), settings)


def rule(d: PoolDiagnosis, name: str) -> dict[str, bool]:
    (found,) = [r for r in d.rules if r.rule == name]
    return {c.name: c.held for c in found.checks}


def test_p50_rising_with_p95_and_p99_is_upstream_compute() -> None:
    d = diagnose(
        pool(
            window(seconds=20, requests=340, ttft=(1948, 3277, 3573), inflight=113),
            window(seconds=30, requests=60),
        )
    )
    assert (d.verdict, d.scale_advice) == ("compute_short", 1)
    assert rule(d, "compute_short") == {
        "upstream_p50_rises": True,
        "p95_rises": True,
        "p99_rises": True,
    }
    assert "1948 ms, was 43 ms" in d.summary and "scale the model servers" in d.summary
    assert d.recent.upstream_p50_ms == pytest.approx(1947.95)


def test_a_wait_in_the_gateway_queue_is_queueing_not_compute() -> None:
    # In-flight pinned at the pool's limit, the queue full: TTFT is mostly queue wait.
    d = diagnose(
        pool(
            window(
                seconds=20, requests=340, rejected=200, ttft=(316, 376, 376),
                wait=(290, 316, 316), depth=8,
            ),
            window(seconds=30, requests=70, ttft=(43, 79, 111)),
            near_slots=2,
            inflight_limit=2,
        )
    )  # fmt: skip
    assert (d.verdict, d.scale_advice) == ("queueing", 2)
    checks = rule(d, "queueing")
    assert all(checks.values()) and set(checks) == {
        "p99_rises", "traffic_rises", "tail_pulls_away", "upstream_p50_holds",
    }  # fmt: skip
    assert not rule(d, "compute_short")["upstream_p50_rises"]  # 316 - 290 ms against 43 ms
    assert (
        "max_inflight, now 2" in d.summary and "adding upstream compute will not help" in d.summary
    )
    # Without an SLO the third rule cannot be judged, and says why.
    (third,) = [r for r in d.rules if r.rule == "not_compute"]
    assert not third.matched and third.not_evaluated is not None and "SLO" in third.not_evaluated


def test_p99_pulling_away_from_p95_with_traffic_while_p50_holds_is_queueing() -> None:
    baseline = window(seconds=30, requests=90, ttft=(45, 80, 110))
    tail = window(seconds=20, requests=300, ttft=(50, 120, 400))
    d = diagnose(pool(tail, baseline))
    assert d.verdict == "queueing"
    assert rule(d, "queueing")["tail_pulls_away"]  # 400 >= 1.5 x 120, no queue wait at all
    # The same tail without more traffic is not "moving with traffic": nothing matches.
    flat = window(seconds=20, requests=60, ttft=(50, 120, 400))
    same_traffic = diagnose(pool(flat, baseline))
    assert not rule(same_traffic, "queueing")["traffic_rises"]
    assert same_traffic.verdict == "healthy" and same_traffic.summary.startswith("healthy: ")


def _saturated(slo_ms: int | None, route_p95: float) -> PoolDiagnosis:
    recent = window(
        seconds=20, requests=220, rejected=30, ttft=(900, 1800, 2000), wait=(850, 1700, 1900),
        depth=8, inflight=64,
    )  # fmt: skip
    baseline = window(seconds=30, requests=240, ttft=(60, 150, 200), wait=(5, 50, 90), inflight=20)
    return diagnose(
        pool(recent, baseline, near_slots=2, inflight_limit=64), slo=slo_ms, route_p95=route_p95
    )


def test_a_full_queue_over_the_slo_without_more_throughput_is_not_compute() -> None:
    d = _saturated(1500, 1800)
    assert (d.verdict, d.scale_advice) == ("not_compute", 3)
    assert rule(d, "not_compute") == {
        "queue_near_limit_sustained": True,
        "p95_over_slo": True,
        "throughput_flat_with_inflight": True,
    }
    assert d.queue_near_slots == 2 and d.objectives[0].slo_ttft_p95_ms == 1500
    assert "chat 1800 ms against 1500 ms" in d.summary
    # It takes precedence over queueing, which matches too ("raise concurrency" would not help).
    assert all(rule(d, "queueing").values())
    # Within its SLO the route is fine: queueing is the verdict.
    assert _saturated(2000, 1800).verdict == "queueing"
    assert _saturated(None, 1800).verdict == "queueing"


@pytest.mark.parametrize(
    ("retries", "timeouts", "errors", "verdict"),
    [
        (20, 0, 0, "backlog"),  # clients retry: 10% of requests, were none
        (0, 4, 4, "backlog"),  # upstream timeouts (2%), no other error
        (0, 0, 0, "healthy"),  # TTFT rises alone: no backlog yet
        (20, 0, 10, "healthy"),  # 5% errors: success does not look normal
    ],
)
def test_ttft_rising_with_retries_or_timeouts_and_normal_success_is_a_backlog(
    retries: int, timeouts: int, errors: int, verdict: str
) -> None:
    recent = window(
        seconds=20, requests=200, ttft=(200, 350, 400), retries=retries, timeouts=timeouts,
        errors=errors,
    )  # fmt: skip
    baseline = window(seconds=30, requests=300, ttft=(100, 200, 300))
    d = diagnose(pool(recent, baseline))
    assert d.verdict == verdict
    assert d.scale_advice == (4 if verdict == "backlog" else 0)
    assert not rule(d, "compute_short")["p99_rises"]  # 400 against 300: not x1.5


def test_too_little_traffic_is_not_judged() -> None:
    idle = diagnose(pool(window(seconds=20, requests=5), window(seconds=30, requests=100)))
    assert (idle.verdict, idle.scale_advice, idle.rules) == ("idle", 0, [])
    assert "5 requests" in idle.summary and "needs 20" in idle.summary
    fresh = diagnose(pool(window(seconds=20, requests=100), window(seconds=30, requests=3)))
    assert (fresh.verdict, fresh.rules) == ("no_baseline", [])
    assert "3 requests" in fresh.summary


def test_without_streams_the_total_time_is_judged() -> None:
    d = diagnose(
        pool(
            window(seconds=20, requests=300, ttft=(1948, 3277, 3573), streams=False),
            window(seconds=30, requests=60, streams=False),
        )
    )
    assert d.latency == "total_ms" and d.verdict == "compute_short"
    assert "total time" in d.summary and "1983 ms" in d.summary


def test_thresholds_come_from_the_settings() -> None:
    rising = pool(
        window(seconds=20, requests=300, ttft=(250, 400, 500)), window(seconds=30, requests=60)
    )
    assert diagnose(rising).verdict == "compute_short"
    strict = DoctorSettings(recent_seconds=20, baseline_seconds=30, min_rise_ms=500)
    assert diagnose(rising, settings=strict).verdict == "healthy"
    lax = DoctorSettings(recent_seconds=20, baseline_seconds=30, min_requests=500)
    assert diagnose(rising, settings=lax).verdict == "idle"


def test_the_doctor_reads_the_windows_it_compares_and_the_recent_slots() -> None:
    windows = doctor_windows(S)
    assert [(w.name, w.seconds, w.ends_seconds_ago) for w in windows] == [
        ("recent", 20, 0),
        ("baseline", 30, 20),
        ("slot0", 10, 0),
        ("slot1", 10, 10),
    ]
    assert len(doctor_windows(DoctorSettings())) == 2 + 6


@pytest.mark.parametrize(
    ("option", "value"),
    [("recent_seconds", 15), ("recent_seconds", 0), ("baseline_seconds", 3600), ("rise_ratio", 1)],
)
def test_invalid_doctor_settings_name_the_option(option: str, value: float) -> None:
    from control.api.errors import StartupError
    from control.process.settings import load_settings

    with pytest.raises(StartupError, match=f"doctor.{option}"):
        load_settings(None, {f"SLUICEGATE_DOCTOR_{option.upper()}": str(value)})
    with pytest.raises(StartupError, match="at most 3600"):
        load_settings(
            None,
            {
                "SLUICEGATE_DOCTOR_RECENT_SECONDS": "600",
                "SLUICEGATE_DOCTOR_BASELINE_SECONDS": "3010",
            },
        )
