"""Quotas: reserved atomically at admission, settled to actual use, refused with
`insufficient_quota` and `x-should-retry: false`; prices turn tokens into cost."""

from __future__ import annotations

import concurrent.futures
import time

import httpx

from tests.support.gateway import ConfigBuilder, member

CHAT = "/v1/chat/completions"
# 10 prompt tokens (40 chars) + max_tokens 10 = a 20-token reservation.
BODY = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "x" * 40}]}


def quota(**fields: object) -> dict[str, object]:
    return {"period": "none", "period_start": 0, **fields}


def build(sim_address: str, **key_fields: object) -> tuple[ConfigBuilder, dict[str, str]]:
    cfg = ConfigBuilder().tenant("t")
    key = cfg.key("k", "t", **key_fields)
    cfg.pool("p", [member("m", sim_address)]).route("m", ("p", "sim"))
    return cfg, key.headers


def test_a_quota_for_exactly_one_request_admits_exactly_one_of_fifty(
    sim_factory, gateway_factory
) -> None:
    sim = sim_factory("--ttft-ms", "200", "--itl-ms", "1")
    cfg, headers = build(sim.address, quota=quota(tokens=20))
    gw = gateway_factory(cfg)
    with httpx.Client(timeout=10) as client, concurrent.futures.ThreadPoolExecutor(50) as pool:
        responses = list(
            pool.map(lambda _: client.post(gw.url + CHAT, json=BODY, headers=headers), range(50))
        )
    codes = sorted(r.status_code for r in responses)
    assert codes == [200] + [429] * 49
    refused = next(r for r in responses if r.status_code == 429)
    assert refused.json()["error"]["code"] == "insufficient_quota"
    assert refused.json()["error"]["type"] == "insufficient_quota"
    assert refused.headers["x-should-retry"] == "false"
    (event,) = gw.drain(expect=1)
    assert event["prompt_tokens"] + event["completion_tokens"] <= 20


def test_settlement_frees_what_was_not_used(sim_factory, gateway_factory) -> None:
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "1")
    # 50 tokens: a 20-token reservation that settles to 12 (10 + 2) leaves room for two more.
    cfg, headers = build(sim.address, quota=quota(tokens=50))
    gw = gateway_factory(cfg)
    short = {**headers, "x-sim-output-tokens": "2"}
    codes = [httpx.post(gw.url + CHAT, json=BODY, headers=short).status_code for _ in range(5)]
    # 12 + 12 + 12 = 36 used; the fourth needs 20 more: 56 > 50.
    assert codes == [200, 200, 200, 429, 429]


def test_money_quota_and_costs_in_usage_events(sim_factory, gateway_factory) -> None:
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "1")
    cfg, headers = build(sim.address, quota=quota(cost_micros=100))
    # 2 units per prompt token, 3 per output token (per million: 2e6 and 3e6 micro-units).
    cfg.prices = [
        {"model": "m", "version": 7, "input_per_mtok": 2_000_000, "output_per_mtok": 3_000_000}
    ]
    gw = gateway_factory(cfg)
    ok = httpx.post(gw.url + CHAT, json=BODY, headers={**headers, "x-sim-output-tokens": "4"})
    assert ok.status_code == 200
    (event,) = gw.drain(expect=1)
    assert event["cost_micros"] == 10 * 2 + 4 * 3 and event["price_version"] == 7
    # Reservation: 10 * 2 + 10 * 3 = 50; used 32 so far, 82 > 100 is still fine, the next is not.
    assert (
        httpx.post(
            gw.url + CHAT, json=BODY, headers={**headers, "x-sim-output-tokens": "10"}
        ).status_code
        == 200
    )
    refused = httpx.post(gw.url + CHAT, json=BODY, headers=headers)
    assert refused.status_code == 429 and "spending quota" in refused.json()["error"]["message"]


def test_the_ledger_figure_is_adopted_and_a_new_period_starts_from_zero(
    sim_factory, gateway_factory
) -> None:
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "1")
    day = int(time.time()) // 86400 * 86400
    yesterday = day - 86400
    # The ledger says 95 of 100 were used today: one 20-token request does not fit.
    cfg, headers = build(
        sim.address,
        quota={"period": "daily", "tokens": 100, "period_start": day, "used_tokens": 95},
    )
    gw = gateway_factory(cfg)
    assert httpx.post(gw.url + CHAT, json=BODY, headers=headers).status_code == 429
    # Figures that belong to yesterday mean nothing today: a fresh key state starts from zero.
    cfg2, headers2 = build(
        sim.address,
        quota={"period": "daily", "tokens": 100, "period_start": yesterday, "used_tokens": 95},
    )
    gw2 = gateway_factory(cfg2)
    assert httpx.post(gw2.url + CHAT, json=BODY, headers=headers2).status_code == 200


def test_tenant_quota_binds_all_its_keys(sim_factory, gateway_factory) -> None:
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "1")
    cfg = ConfigBuilder().tenant("t", quota=quota(tokens=30))
    a, b = cfg.key("a", "t"), cfg.key("b", "t")
    cfg.pool("p", [member("m", sim.address)]).route("m", ("p", "sim"))
    gw = gateway_factory(cfg)
    short = {"x-sim-output-tokens": "2"}
    assert httpx.post(gw.url + CHAT, json=BODY, headers={**a.headers, **short}).status_code == 200
    r = httpx.post(gw.url + CHAT, json=BODY, headers={**b.headers, **short})
    assert r.status_code == 429 and r.json()["error"]["message"].startswith("tenant")


def test_a_new_period_counts_what_the_ledger_does_not_have_yet(
    sim_factory, gateway_factory
) -> None:
    """A quota's period turns while requests of the new period are not yet drained: the ledger's
    figure for it (here 0: nothing stored) plus what the core charged since the period began
    holds exactly. The period is one whose `period_start` the test has just crossed (a period
    short enough to cross in a test); the core adopts the figure when the snapshot carrying it
    is applied."""
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "1")
    start = int(time.time()) + 1
    earlier = quota(tokens=100, period_start=start - 60)
    cfg, headers = build(sim.address, quota=earlier)
    gw = gateway_factory(cfg)
    time.sleep(max(0.0, start - time.time()))
    # Two requests of the new period, 20 tokens each (10 prompt + 10 generated), their events
    # neither drained nor acknowledged.
    for _ in range(2):
        assert httpx.post(gw.url + CHAT, json=BODY, headers=headers).status_code == 200
    cfg.keys[0]["quota"] = quota(tokens=100, period_start=start, used_tokens=0)
    gw.apply(cfg)
    # 40 of 100 used: three more fit, the fourth is refused. (Adopting the ledger's 0 alone
    # would have let five through: spend forgotten.)
    codes = [httpx.post(gw.url + CHAT, json=BODY, headers=headers).status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    events = gw.drain(expect=5)
    assert sum(e["prompt_tokens"] + e["completion_tokens"] for e in events) == 100
    # Figures that include those events, for the same period, change nothing: the core is in
    # that period already and keeps its own count (no event counted twice).
    cfg.keys[0]["quota"] = quota(tokens=100, period_start=start, used_tokens=100)
    gw.apply(cfg)
    assert httpx.post(gw.url + CHAT, json=BODY, headers=headers).status_code == 429
