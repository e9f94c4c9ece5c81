"""The retry rules on their own: which answers may be retried, how long the server asks to wait,
and the backoff between attempts."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from email.utils import format_datetime

import pytest
from sluicegate.client.policy import Policy
from sluicegate.client.retry import backoff, delay_before, retry_after, should_retry_status


def test_retry_after_ms_comes_first_then_seconds_then_a_date() -> None:
    assert retry_after({"retry-after-ms": "250", "retry-after": "3"}) == 0.25
    assert retry_after({"retry-after": "3"}) == 3.0
    assert retry_after({"retry-after": "1.5"}) == 1.5
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC).timestamp()
    later = format_datetime(datetime(2026, 1, 2, 3, 4, 12, tzinfo=UTC), usegmt=True)
    assert retry_after({"retry-after": later}, now=now) == pytest.approx(7.0)
    earlier = format_datetime(datetime(2026, 1, 2, 3, 4, 0, tzinfo=UTC), usegmt=True)
    assert retry_after({"retry-after": earlier}, now=now) == 0.0


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"retry-after": "soon"},
        {"retry-after": "-1"},
        {"retry-after-ms": "nan"},
        {"retry-after": "inf"},
    ],
)
def test_nonsense_retry_after_is_no_hint(headers: dict[str, str]) -> None:
    assert retry_after(headers) is None


def test_what_may_be_retried_follows_the_sdks_with_the_servers_word_first() -> None:
    for status in (408, 409, 429, 500, 502, 503, 504, 529):
        assert should_retry_status(status, {})
    for status in (400, 401, 403, 404, 413, 422):
        assert not should_retry_status(status, {})
    assert not should_retry_status(503, {"x-should-retry": "false"})
    assert not should_retry_status(429, {"x-should-retry": "FALSE"})
    assert should_retry_status(400, {"x-should-retry": "true"})


def test_full_jitter_backoff_stays_under_its_exponential_ceiling_and_the_cap() -> None:
    policy = Policy(backoff_base=0.1, backoff_cap=0.5)
    rng = random.Random(7)
    for retry, ceiling in ((1, 0.1), (2, 0.2), (3, 0.4), (4, 0.5), (9, 0.5)):
        draws = [backoff(retry, policy, rng) for _ in range(300)]
        assert all(0.0 <= d <= ceiling for d in draws)
        # Full jitter: spread over the whole range, not bunched at the ceiling.
        assert min(draws) < ceiling * 0.1 and max(draws) > ceiling * 0.9


def test_a_servers_wait_is_honoured_stretched_a_little_and_refused_past_the_limit() -> None:
    policy = Policy(backoff_base=0.01, backoff_cap=0.02, max_retry_after=5)
    rng = random.Random(3)
    waits = [delay_before(1, policy, 1.0, rng) for _ in range(200)]
    assert all(w is not None and 1.0 <= w <= 1.2 for w in waits)
    assert len({round(w or 0, 4) for w in waits}) > 100  # not all at the same instant
    assert delay_before(1, policy, 5.5, rng) is None
    # A wait shorter than the client's own backoff does not make it retry sooner.
    slow = Policy(backoff_base=2.0, backoff_cap=2.0)
    assert all((delay_before(1, slow, 0.0, random.Random(s)) or 0) >= 0 for s in range(20))


def test_policy_refuses_nonsense_and_bounds_deadlines() -> None:
    for bad in (
        {"deadline": 0}, {"deadline": 7200}, {"max_attempts": 0}, {"max_attempts": 11},
        {"backoff_base": 2, "backoff_cap": 1}, {"deadline_margin": -1}, {"deadline": float("nan")},
    ):  # fmt: skip
        with pytest.raises(ValueError):
            Policy(**bad)
    policy = Policy(deadline=30)
    assert policy.call_deadline(None) == 30
    assert policy.call_deadline(5) == 5
    assert policy.call_deadline(10_000) == 3600  # never beyond what the gateway accepts
    assert policy.margin(0.5) == pytest.approx(0.05)  # at most a tenth of what is left
    assert policy.margin(60) == 0.1
    assert policy.with_retries(0).max_attempts == 1
    with pytest.raises(ValueError):
        policy.with_retries(-1)
