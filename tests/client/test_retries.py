"""Retries, seen from the simulator's record and the gateway's usage events: what is retried,
after how long (the server's word, else full-jitter backoff under a cap), how many times, and
within which budget."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import replace

import openai
import pytest
from sluicegate.client import Governor, OpenAI, Policy

from tests.client.conftest import HELLO, QUICK, Stack, gaps


def client(stack: Stack, governor: Governor, policy: Policy = QUICK) -> OpenAI:
    return OpenAI(
        base_url=stack.openai_url, api_key=stack.key.secret, governor=governor, policy=policy
    )


def call(sdk: OpenAI, fault: str) -> None:
    sdk.chat.completions.create(
        model="gpt", max_tokens=2, messages=HELLO, extra_headers={"x-sim-fault": fault}
    )


def test_429_retry_after_ms_is_waited_for_and_attempts_are_numbered(
    stack: Stack, governor: Governor
) -> None:
    # retry-after says 1 s (rounded up), retry-after-ms 400: the exact figure wins.
    with pytest.raises(openai.RateLimitError):
        call(client(stack, governor), "status,code=429,retry_after=0.4")
    rows = stack.records(expect=3)
    assert [r["status"] for r in rows] == [429, 429, 429]
    for gap in gaps(rows):
        assert 0.4 <= gap < 0.4 * 1.2 + 0.2, gaps(rows)
    events = stack.events(expect=3)
    assert sorted(e["client_retry_count"] for e in events) == [0, 1, 2]
    assert {e["request_id"] for e in events} == {r["request_id"] for r in rows}


@pytest.mark.parametrize("form", ["seconds", "date"])
def test_retry_after_in_seconds_or_as_an_http_date(
    stack: Stack, governor: Governor, form: str
) -> None:
    policy = replace(QUICK, max_attempts=2)
    with pytest.raises(openai.InternalServerError):
        call(
            client(stack, governor, policy), f"status,code=503,retry_after=1,retry_after_as={form}"
        )
    rows = stack.records(expect=2)
    assert len(rows) == 2
    # A date has whole seconds (rounded up by the simulator), so it asks for 1 to 2 s.
    (gap,) = gaps(rows)
    assert 0.95 <= gap < (1.4 if form == "seconds" else 2.6), gap


def test_x_should_retry_false_is_never_retried_and_true_always_is(
    stack: Stack, governor: Governor
) -> None:
    sdk = client(stack, governor)
    with pytest.raises(openai.InternalServerError):
        call(sdk, "status,code=503,should_retry=false")
    assert len(stack.records(expect=1)) == 1
    # 400 is not retried by default; the server's `true` overrides that.
    with pytest.raises(openai.BadRequestError):
        call(sdk, "status,code=400")
    with pytest.raises(openai.BadRequestError):
        call(sdk, "status,code=400,should_retry=true")
    rows = stack.records(expect=5)
    assert [r["status"] for r in rows] == [503, 400, 400, 400, 400]
    assert len(stack.events(expect=5)) == 5


def test_a_wait_longer_than_the_policy_allows_or_than_the_deadline_is_not_retried(
    stack: Stack, governor: Governor
) -> None:
    # 503s: an upstream's 429 also cools its member down at the gateway, which would answer
    # the next call itself.
    sdk = client(stack, governor, replace(QUICK, max_retry_after=2))
    began = time.monotonic()
    with pytest.raises(openai.InternalServerError):
        call(sdk, "status,code=503,retry_after=3")
    with pytest.raises(openai.InternalServerError):
        call(sdk.with_options(timeout=1.0), "status,code=503,retry_after=1.5")
    assert time.monotonic() - began < 1.0  # neither waited
    assert len(stack.records(expect=2, timeout=2)) == 2


def test_backoff_is_exponential_with_full_jitter_under_the_cap(stack: Stack) -> None:
    governor = Governor(budget_ratio=1.0, budget_min_per_second=10, export=False)
    policy = Policy(backoff_base=0.05, backoff_cap=0.15, max_attempts=5)
    sdk = client(stack, governor, policy)
    calls = 6
    per_call: list[list[float]] = []
    for _ in range(calls):
        before = len(stack.records())
        with pytest.raises(openai.InternalServerError):
            call(sdk, "status,code=503")
        rows = stack.records(expect=before + 5)[before:]
        assert len(rows) == 5
        per_call.append(gaps(rows))
    slack = 0.05  # the gateway's and the simulator's own time between attempts
    for retry, ceiling in enumerate((0.05, 0.1, 0.15, 0.15)):
        observed = [g[retry] for g in per_call]
        assert max(observed) <= ceiling + slack, (retry, observed)
    # Full jitter spreads the waits: across calls, the last (capped) gap is not one value.
    assert statistics.pstdev([g[3] for g in per_call]) > 0.01, per_call
    assert governor.stats()["attempts"] == {"count": calls, "p50": 5, "p95": 5, "p99": 5, "max": 5}


def test_the_retry_budget_bounds_retries_to_a_ratio_of_calls_plus_the_floor(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory("--fault", "status=1,code=503")
    governor = Governor(budget_ratio=0.1, budget_min_per_second=0.2, export=False)
    sdk = client(stack, governor, replace(QUICK, backoff_base=0.001, backoff_cap=0.002))
    calls = 40
    for _ in range(calls):
        with pytest.raises(openai.InternalServerError):
            sdk.chat.completions.create(model="gpt", max_tokens=2, messages=HELLO)
    allowed = int(0.1 * calls + 0.2 * 10)  # 6
    rows = stack.records(expect=calls + allowed)
    assert len(rows) == calls + allowed, len(rows)
    events = stack.events(expect=calls + allowed)
    assert len(events) == calls + allowed
    assert sum(e["client_retry_count"] > 0 for e in events) == allowed
    stats = governor.stats()
    assert stats["retries"] == allowed
    assert stats["budget"]["exhausted_total"] >= calls - allowed


def test_the_gateways_own_rate_limit_is_waited_out_and_its_quota_refusal_is_final(
    stack_factory: Callable[..., Stack], governor: Governor
) -> None:
    # One request per 0.5 s for this key: the second call is refused with retry-after-ms and
    # comes back when the gateway said, once.
    stack = stack_factory(key_extra={"limits": {"rpm": 120, "rpm_burst": 1}})
    sdk = client(stack, governor)
    sdk.chat.completions.create(model="gpt", max_tokens=2, messages=HELLO)
    sdk.chat.completions.create(model="gpt", max_tokens=2, messages=HELLO)
    rows = stack.records(expect=2)
    assert len(rows) == 2 and gaps(rows)[0] >= 0.45, gaps(rows)
    rejections = stack.gateway.metrics()["sluicegate_rejections_total"]["samples"]
    assert {"labels": ["rpm"], "value": 1.0} in rejections
    # A key over its quota gets `x-should-retry: false` from the gateway: one refusal, no retry.
    spent = stack.config.key(
        "k-spent", "t", quota={"period": "none", "period_start": 0, "tokens": 1}
    )
    stack.gateway.apply(stack.config)
    broke = OpenAI(base_url=stack.openai_url, api_key=spent.secret, governor=governor, policy=QUICK)
    with pytest.raises(openai.RateLimitError) as refused:
        broke.chat.completions.create(model="gpt", max_tokens=2, messages=HELLO)
    assert refused.value.code == "insufficient_quota"
    rejections = stack.gateway.metrics()["sluicegate_rejections_total"]["samples"]
    assert {"labels": ["quota"], "value": 1.0} in rejections
    assert len(stack.records()) == 2
