"""The admin CLI: each command becomes the right request; errors are printed, exit non-zero."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sluicegate import _core
from sluicegate.cli import drill_watch, main
from sluicegate.cli.client import AdminClient, CliError
from sluicegate.cli.parser import build_parser

from tests.control.helpers import ADMIN_TOKEN, Harness
from tests.control.usage_events import FakeCore, event


def request_of(*argv: str) -> tuple[str, str, Any, dict[str, Any]]:
    args = build_parser().parse_args(list(argv))
    method, path, body, query = args.handler(args)
    return method, path, body, query


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["tenants", "create", "--id", "acme", "--name", "Acme", "--rpm", "60"],
            ("POST", "/v1/admin/tenants", {"name": "Acme", "id": "acme", "rpm": 60}, {}),
        ),
        (
            ["tenants", "list", "--status", "active"],
            ("GET", "/v1/admin/tenants", None, {"status": "active"}),
        ),
        (["tenants", "show", "acme"], ("GET", "/v1/admin/tenants/acme", None, {})),
        (
            ["tenants", "update", "acme", "--tpm", "none", "--max-concurrency", "4"],
            ("PATCH", "/v1/admin/tenants/acme", {"tpm": None, "max_concurrency": 4}, {}),
        ),
        (
            ["tenants", "disable", "acme"],
            ("PATCH", "/v1/admin/tenants/acme", {"status": "disabled"}, {}),
        ),
        (
            ["tenants", "token", "acme", "--name", "ops"],
            ("POST", "/v1/admin/tenants/acme/tokens", {"name": "ops"}, {}),
        ),
        (
            ["keys", "create", "--tenant", "acme", "--models", "a,b", "--priority", "batch"],
            (
                "POST",
                "/v1/admin/keys",
                {"tenant_id": "acme", "models": ["a", "b"], "priority": "batch"},
                {},
            ),
        ),
        (
            ["keys", "list", "--tenant", "acme", "--prefix", "sk-sg-ab", "--limit", "5"],
            (
                "GET",
                "/v1/admin/keys",
                None,
                {"prefix": "sk-sg-ab", "limit": 5, "tenant_id": "acme"},
            ),
        ),
        (
            ["keys", "update", "k1", "--models", "all", "--status", "disabled"],
            ("PATCH", "/v1/admin/keys/k1", {"models": None, "status": "disabled"}, {}),
        ),
        (
            ["keys", "rotate", "k1", "--overlap", "60"],
            ("POST", "/v1/admin/keys/k1/rotate", {"overlap_seconds": 60}, {}),
        ),
        (["keys", "revoke", "k1"], ("POST", "/v1/admin/keys/k1/revoke", None, {})),
        (
            [
                "pools",
                "create",
                "--id",
                "p",
                "--member",
                "a",
                "--member",
                "b:3:16",
                "--idle-ms",
                "900",
            ],
            (
                "POST",
                "/v1/admin/pools",
                {
                    "members": [
                        {"provider_id": "a"},
                        {"provider_id": "b", "weight": 3, "max_concurrency": 16},
                    ],
                    "id": "p",
                    "timeouts": {"idle_ms": 900},
                },
                {},
            ),
        ),
        (
            ["routes", "create", "--alias", "chat", "--target", "p:llama:8b", "--target", "q:x"],
            (
                "POST",
                "/v1/admin/routes",
                {
                    "alias": "chat",
                    "chain": [{"pool": "p", "model": "llama:8b"}, {"pool": "q", "model": "x"}],
                },
                {},
            ),
        ),
        (["routes", "show", "meta/llama"], ("GET", "/v1/admin/routes/meta/llama", None, {})),
        (
            ["tenants", "update", "acme", "--rpm-burst", "20", "--tpm-burst", "none"],
            ("PATCH", "/v1/admin/tenants/acme", {"rpm_burst": 20, "tpm_burst": None}, {}),
        ),
        (
            ["keys", "create", "--tenant", "acme", "--rpm", "60", "--rpm-burst", "5"],
            ("POST", "/v1/admin/keys", {"tenant_id": "acme", "rpm": 60, "rpm_burst": 5}, {}),
        ),
        (
            [
                "pools",
                "create",
                "--id",
                "p",
                "--member",
                "a",
                "--max-inflight",
                "64",
                "--batch-max-depth",
                "10",
                "--tenant-share",
                "0.25",
                "--retry-on",
                "connect,503",
                "--retry-budget-ratio",
                "0.1",
                "--ejection-max-percent",
                "30",
                "--health-check-path",
                "/health",
                "--total-ms",
                "9000",
            ],
            (
                "POST",
                "/v1/admin/pools",
                {
                    "members": [{"provider_id": "a"}],
                    "id": "p",
                    "timeouts": {"total_ms": 9000},
                    "admission": {
                        "max_inflight": 64,
                        "batch": {"max_depth": 10},
                        "tenant_share": 0.25,
                    },
                    "retry": {"retry_on": ["connect", "503"], "budget_ratio": 0.1},
                    "ejection": {"max_ejected_percent": 30},
                    "health_check": {"path": "/health"},
                },
                {},
            ),
        ),
        (
            [
                "pools",
                "update",
                "p",
                "--max-inflight",
                "none",
                "--interactive-max-wait-ms",
                "500",
                "--retry-max-attempts",
                "2",
                "--no-health-check",
            ],
            (
                "PATCH",
                "/v1/admin/pools/p",
                {
                    "admission": {"max_inflight": None, "interactive": {"max_wait_ms": 500}},
                    "retry": {"max_attempts": 2},
                    "health_check": None,
                },
                {},
            ),
        ),
        (
            ["pools", "update", "p", "--member", "b:2"],
            ("PATCH", "/v1/admin/pools/p", {"members": [{"provider_id": "b", "weight": 2}]}, {}),
        ),
    ],
)
def test_commands_become_requests(argv: list[str], expected: tuple[Any, ...]) -> None:
    assert request_of(*argv) == expected


def test_credentials_come_from_the_environment_never_argv(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UPSTREAM_KEY", "sk-from-env")
    method, path, body, query = request_of(
        "providers",
        "create",
        "--kind",
        "openai",
        "--base-url",
        "http://h/v1",
        "--credential-env",
        "UPSTREAM_KEY",
    )
    assert (method, path, query) == ("POST", "/v1/admin/providers", {})
    assert body == {
        "kind": "openai",
        "base_url": "http://h/v1",
        "internal": False,
        "credential": "sk-from-env",
    }
    with pytest.raises(SystemExit):
        build_parser().parse_args(
            ["providers", "create", "--kind", "openai", "--base-url", "x", "--credential", "s"]
        )


@pytest.mark.parametrize(
    "bad",
    [
        ["pools", "create", "--member", "a:b"],
        ["routes", "create", "--alias", "x", "--target", "nopool"],
    ],
)
def test_malformed_options_are_usage_errors(bad: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(bad)
    assert exited.value.code == 2


def test_contradictory_health_check_options_are_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = [
        "pools",
        "update",
        "p",
        "--no-health-check",
        "--health-check-path",
        "/x",
        "--token",
        "t",
    ]
    assert main(argv) == 2
    assert "--no-health-check cannot go with" in capsys.readouterr().err


def test_errors_print_the_api_error_and_exit_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def fake(request: httpx.Request) -> httpx.Response:
        assert request.headers["authorization"] == "Bearer sgt_token"
        error = {
            "code": "validation_error",
            "message": "bad",
            "fields": [{"field": "rpm", "message": "too high"}],
        }
        return httpx.Response(422, json={"error": error})

    monkeypatch.setattr(AdminClient, "transport", httpx.MockTransport(fake))
    monkeypatch.setenv("SLUICEGATE_ADMIN_TOKEN", "sgt_token")
    assert main(["tenants", "update", "acme", "--rpm", "9"]) == 1
    err = capsys.readouterr().err
    assert "HTTP 422 validation_error: bad" in err and "rpm: too high" in err


def test_success_prints_json(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    answer = httpx.MockTransport(lambda request: httpx.Response(200, json={"id": "acme"}))
    monkeypatch.setattr(AdminClient, "transport", answer)
    assert main(["tenants", "show", "acme", "--token", "sgt_x", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"id": "acme"}


def test_missing_token_and_unreachable_api(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("SLUICEGATE_ADMIN_TOKEN", raising=False)
    assert main(["tenants", "list"]) == 2
    assert "no admin token" in capsys.readouterr().err
    assert main(["tenants", "list", "--token", "t", "--admin-url", "http://127.0.0.1:1"]) == 1
    assert "cannot reach the admin API" in capsys.readouterr().err


@pytest.mark.parametrize(("text", "seconds"), [("90", 90), ("60s", 60), ("5m", 300), ("1h", 3600)])
def test_drill_durations(text: str, seconds: int) -> None:
    args = build_parser().parse_args(["drill", "--route", "r", "--pool", "p", "--for", text])
    assert (args.seconds, args.pool, args.eject) == (seconds, "p", None)


@pytest.mark.parametrize(
    "bad",
    [
        ["drill", "--route", "r", "--pool", "p", "--for", "0s"],
        ["drill", "--route", "r", "--pool", "p", "--for", "soon"],
        ["drill", "--route", "r", "--for", "5s"],  # neither --eject nor --pool
        ["drill", "--route", "r", "--pool", "p", "--eject", "m", "--for", "5s"],
    ],
)
def test_drill_usage_errors(bad: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(bad)
    assert exited.value.code == 2


def test_drills_commands_become_requests() -> None:
    assert request_of("drills", "list", "--active", "--pool", "p") == (
        "GET",
        "/v1/admin/drills",
        None,
        {"pool": "p", "active": "true"},
    )
    assert request_of("drills", "end", "drl_1") == ("DELETE", "/v1/admin/drills/drl_1", None, {})


class FakeApi:
    """Routes and pools as the admin API would answer them."""

    def __init__(self, chain: list[str], members: dict[str, list[str]]) -> None:
        self.chain, self.members = chain, members

    def call(self, method: str, path: str, body: Any = None) -> Any:
        if path.startswith("/v1/admin/routes/"):
            return {"chain": [{"pool": p, "model": "m"} for p in self.chain]}
        pool = path.rsplit("/", 1)[1]
        return {"members": [{"id": m} for m in self.members[pool]]}


def test_drill_finds_the_pool_of_an_ejected_member() -> None:
    api: Any = FakeApi(["primary", "backup"], {"primary": ["a", "b"], "backup": ["b", "c"]})
    target = drill_watch.drill_target
    assert target(api, "chat", "a", None) == {"pool": "primary", "member": "a"}
    assert target(api, "chat", "c", None) == {"pool": "backup", "member": "c"}
    assert target(api, "chat", "backup:b", None) == {"pool": "backup", "member": "b"}
    assert target(api, "chat", None, "primary") == {"pool": "primary"}
    with pytest.raises(CliError, match="--eject primary:b"):
        target(api, "chat", "b", None)
    with pytest.raises(CliError, match="has a member 'z'"):
        target(api, "chat", "z", None)


def test_drill_lines_difference_the_counters() -> None:
    before: Any = ({("p", "a"): {"2xx": 10}, ("q", "b"): {"2xx": 1}}, {"overloaded": 2})
    after: Any = (
        {("p", "a"): {"2xx": 10}, ("q", "b"): {"2xx": 9, "5xx": 1, "4xx": 2}},
        {"overloaded": 3, "no_upstream": 1},
    )
    line = drill_watch.progress_line(1.02, before, after)
    assert line == "+1s  p/a 0  q/b 11  | 11 requests, 3 errors (27.3%), 2 refused by the gateway"
    summary = drill_watch.summary(before, after)
    assert "  p/a  0\n  q/b  11\n" in summary
    assert summary.endswith(
        "errors: 3 of 11 requests (27.3%); refused by the gateway (all routes): 2"
    )


# --- quotas and usage ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            [
                "keys",
                "create",
                "--tenant",
                "acme",
                "--quota-period",
                "daily",
                "--quota-tokens",
                "9",
            ],
            (
                "POST",
                "/v1/admin/keys",
                {"tenant_id": "acme", "quota": {"period": "daily", "tokens": 9}},
                {},
            ),
        ),
        (
            [
                "tenants",
                "create",
                "--name",
                "A",
                "--quota-period",
                "none",
                "--quota-cost-micros",
                "5000000",
            ],
            (
                "POST",
                "/v1/admin/tenants",
                {"name": "A", "quota": {"period": "none", "cost_micros": 5000000}},
                {},
            ),
        ),
        (
            ["tenants", "update", "acme", "--quota-period", "monthly", "--quota-tokens", "7"],
            ("PATCH", "/v1/admin/tenants/acme", {"quota": {"period": "monthly", "tokens": 7}}, {}),
        ),
        (
            ["keys", "update", "k1", "--no-quota"],
            ("PATCH", "/v1/admin/keys/k1", {"quota": None}, {}),
        ),
        (["keys", "update", "k1", "--rpm", "5"], ("PATCH", "/v1/admin/keys/k1", {"rpm": 5}, {})),
        (["keys", "quota", "k1"], ("GET", "/v1/admin/keys/k1/quota", None, {})),
        (["keys", "quota-reset", "k1"], ("POST", "/v1/admin/keys/k1/quota/reset", None, {})),
        (["tenants", "quota", "acme"], ("GET", "/v1/admin/tenants/acme/quota", None, {})),
        (
            ["tenants", "quota-reset", "acme"],
            ("POST", "/v1/admin/tenants/acme/quota/reset", None, {}),
        ),
        (
            ["usage", "series", "k1", "--granularity", "minute", "--from", "T1", "--to", "T2"],
            (
                "GET",
                "/v1/admin/keys/k1/usage/series",
                None,
                {"to": "T2", "granularity": "minute", "from": "T1"},
            ),
        ),
        (["usage", "models", "k1"], ("GET", "/v1/admin/keys/k1/usage/models", None, {})),
        (
            ["usage", "latency", "k1", "--from", "T1"],
            ("GET", "/v1/admin/keys/k1/usage/latency", None, {"from": "T1"}),
        ),
        (
            ["usage", "list", "--tenant-id", "acme", "--outcome", "timeout", "--since", "T1"],
            (
                "GET",
                "/v1/admin/usage",
                None,
                {"tenant_id": "acme", "outcome": "timeout", "since": "T1"},
            ),
        ),
        (
            ["usage", "list", "--tag", "team=search", "--end-user", "u1"],
            ("GET", "/v1/admin/usage", None, {"tag": "team=search", "end_user": "u1"}),
        ),
        (
            ["usage", "groups", "--by", "tag:team", "--tenant-id", "acme", "--from", "T1"],
            (
                "GET",
                "/v1/admin/usage/groups",
                None,
                {"by": "tag:team", "tenant_id": "acme", "from": "T1"},
            ),
        ),
        (
            ["usage", "export", "k1", "--tag", "team=search"],
            ("GET", "/v1/admin/keys/k1/usage/export", None, {"tag": "team=search"}),
        ),
    ],
)
def test_quota_and_usage_commands_become_requests(argv: list[str], expected: Any) -> None:
    assert request_of(*argv) == expected


@pytest.mark.parametrize(
    "bad",
    [
        ["usage", "series", "k1", "--granularity", "second"],
        ["usage", "list", "--outcome", "fine"],
        ["usage", "groups"],  # --by is required
        ["keys", "create", "--tenant", "acme", "--quota-period", "weekly"],
        ["keys", "create", "--tenant", "acme", "--no-quota"],  # nothing to clear at creation
        ["tenants", "update", "acme", "--quota-tokens", "many"],
    ],
)
def test_malformed_quota_and_usage_options_are_usage_errors(bad: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(bad)
    assert exited.value.code == 2


def test_no_quota_cannot_go_with_quota_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys", "update", "k1", "--no-quota", "--quota-tokens", "5", "--token", "t"]) == 2
    assert "--no-quota cannot go with" in capsys.readouterr().err


FORWARDED = ("authorization", "content-type")


class Cli:
    """`sluicegate` against the in-process admin API: the CLI's HTTP calls go to the test app."""

    def __init__(self, harness: Harness, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys = capsys

        def forward(request: httpx.Request) -> httpx.Response:
            sent = {k: v for k, v in request.headers.items() if k in FORWARDED}
            answer = harness.client.request(
                request.method, request.url.raw_path.decode(), content=request.content, headers=sent
            )
            kept = {k: v for k, v in answer.headers.items() if k == "content-type"}
            return httpx.Response(answer.status_code, headers=kept, content=answer.content)

        self.transport = httpx.MockTransport(forward)

    def __call__(self, *argv: str, token: str = ADMIN_TOKEN) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = main([*argv, "--admin-url", "http://testserver", "--token", token])
        out, err = self.capsys.readouterr()
        return code, out, err

    def json(self, *argv: str, token: str = ADMIN_TOKEN) -> Any:
        code, out, err = self(*argv, "--json", token=token)
        assert code == 0, err
        return json.loads(out)


@pytest.fixture
def cli(
    harness: Harness, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Cli:
    runner = Cli(harness, capsys)
    monkeypatch.setattr(AdminClient, "transport", runner.transport)
    return runner


def test_quotas_with_the_cli(harness: Harness, world: dict[str, Any], cli: Cli) -> None:
    key = world["acme_key"]["id"]
    updated = cli.json("keys", "update", key, "--quota-period", "daily", "--quota-tokens", "1000")
    assert updated["quota"] == {
        "period": "daily",
        "tokens": 1000,
        "cost_micros": None,
        "reset_at": None,
    }
    status = cli.json("keys", "quota", key)
    assert (status["period"], status["used_tokens"], status["remaining_tokens"]) == (
        "daily",
        0,
        1000,
    )

    # Two requests of 12 + 34 tokens, a little before now (the reset below counts from its second).
    now = time.time()
    events = [event(r, key_id=key, seq=i, started_at=now - 2) for i, r in enumerate("ab", 1)]
    assert FakeCore(events).drainer(harness).drain()
    status = cli.json("keys", "quota", key)
    assert (status["used_tokens"], status["remaining_tokens"]) == (92, 908)
    reset = cli.json("keys", "quota-reset", key)
    assert (reset["used_tokens"], reset["remaining_tokens"]) == (0, 1000)
    assert reset["reset_at"] is not None
    assert cli.json("keys", "quota", key)["used_tokens"] == 0

    cleared = cli.json("keys", "update", key, "--no-quota")
    assert cleared["quota"] is None
    code, _, err = cli("keys", "quota", key)
    assert code == 1 and "HTTP 404 not_found: the key has no quota" in err
    code, _, err = cli("keys", "quota-reset", key)
    assert code == 1 and "HTTP 409" in err

    # Tenants, and a key's quota above its tenant's refused with the API's words.
    cli.json(
        "tenants", "update", "acme", "--quota-period", "monthly", "--quota-cost-micros", "1000"
    )
    tenant = cli.json("tenants", "quota", "acme")
    assert (tenant["period"], tenant["cost_micros"], tenant["tokens"]) == ("monthly", 1000, None)
    assert cli.json("tenants", "quota-reset", "acme")["reset_at"] is not None
    code, _, err = cli(
        "keys",
        "create",
        "--tenant",
        "acme",
        "--quota-period",
        "monthly",
        "--quota-cost-micros",
        "2000",
    )
    assert code == 1 and "HTTP 422" in err and "cannot exceed its tenant's" in err
    # An allowance without its period: the API says what is missing, nothing is defaulted.
    code, _, err = cli("keys", "create", "--tenant", "acme", "--quota-tokens", "500")
    assert code == 1 and "HTTP 422" in err and "quota.period" in err
    created = cli.json(
        "keys", "create", "--tenant", "acme", "--quota-period", "none", "--quota-tokens", "500"
    )
    assert created["quota"]["period"] == "none" and created["quota"]["tokens"] == 500
    # Only a period: the API says what is missing.
    code, _, err = cli("keys", "update", created["id"], "--quota-period", "daily")
    assert code == 1 and "HTTP 422" in err and "needs tokens or cost_micros" in err


# 2026-03-04T10:00:00Z, a whole hour.
HOUR0 = 1772618400
WINDOW = ("--from", "2026-03-04T10:00:00Z", "--to", "2026-03-04T12:00:00Z")


def _usage(harness: Harness, key: str, other: str) -> None:
    events = [
        event("a", key_id=key, seq=1, started_at=HOUR0 + 5, ttft_ms=10.0, tpot_ms=1.0),
        event("b", key_id=key, seq=2, started_at=HOUR0 + 50, ttft_ms=20.0, tpot_ms=2.0),
        event("c", key_id=key, seq=3, started_at=HOUR0 + 30, model="other", ttft_ms=30.0),
        event("d", key_id=key, seq=4, started_at=HOUR0 + 3700, ttft_ms=40.0, tpot_ms=4.0),
        event("g", "globex", other, seq=5, started_at=HOUR0 + 10),
    ]
    assert FakeCore(events).drainer(harness).drain()


def test_usage_views_with_the_cli(
    harness: Harness, world: dict[str, Any], cli: Cli, tmp_path: Path
) -> None:
    key, other = world["acme_key"]["id"], world["globex_key"]["id"]
    _usage(harness, key, other)

    series = cli.json("usage", "series", key, "--granularity", "minute", *WINDOW)
    assert series["granularity"] == "minute"
    assert [(b["start"][11:16], b["requests"]) for b in series["buckets"]] == [
        ("10:00", 3),
        ("11:01", 1),
    ]
    hours = cli.json("usage", "series", key, "--model", "chat", *WINDOW)
    assert (hours["granularity"], [b["requests"] for b in hours["buckets"]]) == ("hour", [2, 1])
    models = cli.json("usage", "models", key, *WINDOW)
    assert {m["model"]: m["requests"] for m in models["models"]} == {"chat": 3, "other": 1}
    assert models["total"]["prompt_tokens"] == 4 * 12
    latency = cli.json("usage", "latency", key, *WINDOW)
    assert latency["ttft_ms"] == {"count": 4, "p50": 20.0, "p95": 40.0, "p99": 40.0}
    page = cli.json("usage", "list", "--key-id", key, "--limit", "3")
    assert [r["request_id"] for r in page["items"]] == ["d", "b", "c"] and page["next_cursor"]

    (out_dir := tmp_path / "out").mkdir()
    target = out_dir / "usage.csv"
    code, out, err = cli("usage", "export", key, *WINDOW, "-o", str(target))
    assert (code, out, err) == (0, "", "")
    rows = list(csv.DictReader(io.StringIO(target.read_text())))
    assert [r["request_id"] for r in rows] == ["a", "c", "b", "d"]
    assert {r["key_id"] for r in rows} == {key}
    assert list(out_dir.iterdir()) == [target]  # no partial file left behind
    code, out, _ = cli("usage", "export", key, *WINDOW)
    assert code == 0 and out == target.read_text()
    groups = cli.json("usage", "groups", "--by", "model", *WINDOW)
    assert {g["value"]: g["requests"] for g in groups["groups"]} == {"chat": 4, "other": 1}
    code, out, _ = cli("usage", "groups", "--by", "model", *WINDOW)
    assert code == 0 and out.splitlines()[1].split()[:2] == ["VALUE", "REQUESTS"]


def test_usage_errors_with_the_cli(
    harness: Harness, world: dict[str, Any], cli: Cli, tmp_path: Path
) -> None:
    key, other = world["acme_key"]["id"], world["globex_key"]["id"]
    acme = harness.admin.create_tenant_token("acme")
    # Another tenant's key answers 404, in every view, the export included (and writes no file).
    for view in ("series", "models", "latency"):
        code, out, err = cli("usage", view, other, token=acme)
        assert (code, out) == (1, "") and "HTTP 404 not_found" in err, view
    (out_dir := tmp_path / "out").mkdir()
    code, out, err = cli("usage", "export", other, "-o", str(out_dir / "x.csv"), token=acme)
    assert (code, out) == (1, "") and "HTTP 404 not_found" in err
    assert list(out_dir.iterdir()) == []
    assert cli.json("usage", "models", key, token=acme)["key_id"] == key
    # A range that ends before it starts names the field.
    code, _, err = cli(
        "usage", "series", key, "--from", "2026-03-04T12:00:00Z", "--to", "2026-03-04T10:00:00Z"
    )
    assert code == 1 and "HTTP 422" in err and "  from: " in err
    with pytest.raises(SystemExit) as exited:
        cli("usage", "series", key, "--granularity", "second")
    assert exited.value.code == 2
    assert "invalid choice: 'second'" in cli.capsys.readouterr().err


def test_usage_is_listed_and_its_options_described(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "usage     a key's usage" in capsys.readouterr().out
    for action, options in {
        "series": ("--granularity", "--from", "--to", "--model"),
        "export": ("--output", "--from", "--to"),
        "list": ("--tenant-id", "--key-id", "--outcome", "--since", "--until", "--cursor"),
    }.items():
        with pytest.raises(SystemExit) as exited:
            main(["usage", action, "--help"])
        assert exited.value.code == 0
        text = capsys.readouterr().out
        assert all(option in text for option in options), action


# --- output for people ---------------------------------------------------------------------------


def test_people_read_tables_and_fields_scripts_read_json(
    harness: Harness, world: dict[str, Any], cli: Cli
) -> None:
    code, out, _ = cli("tenants", "list")
    header, *rows = out.splitlines()
    assert code == 0 and header.split()[:3] == ["ID", "NAME", "STATUS"]
    assert "RPM BURST" in header and "MAX CONCURRENCY" in header
    assert [row.split()[:4] for row in rows] == [
        ["acme", "Acme", "active", "600"],
        ["globex", "Globex", "active", "-"],
    ]
    code, out, _ = cli("tenants", "list", "--limit", "1")
    assert out.splitlines()[-1].startswith("(more: --cursor ")

    code, out, _ = cli("pools", "show", "main")
    lines = out.splitlines()
    assert lines[0].split() == ["id", "main"]
    interactive = lines.index("  interactive")
    assert lines[interactive - 1].split() == ["max_inflight", "-"]
    assert lines[interactive + 1].split() == ["max_depth", "256"]
    assert cli.json("pools", "show", "main")["admission"]["interactive"]["max_depth"] == 256


def test_a_new_secret_is_printed_once_on_its_own_line(
    harness: Harness, world: dict[str, Any], cli: Cli
) -> None:
    code, out, _ = cli("keys", "create", "--tenant", "acme", "--name", "laptop")
    first, reminder, *rest = out.splitlines()
    secret = first.removeprefix("key: ")
    assert code == 0 and _core.is_well_formed_api_key(secret)
    assert "shown this once" in reminder
    key_id = next(line.split()[1] for line in rest if line.startswith("id "))
    assert secret not in "\n".join(rest)
    shown = cli("keys", "show", key_id)[1]
    assert secret not in shown and _core.api_key_prefix(secret) in shown

    code, out, _ = cli("keys", "rotate", key_id, "--overlap", "60")
    first, *rest = out.splitlines()
    assert _core.is_well_formed_api_key(first.removeprefix("new key: "))
    assert rest[-1].startswith(f"previous key {key_id} ") and "works until" in rest[-1]
    code, out, _ = cli("tenants", "token", "acme", "--name", "ops")
    assert out.startswith("admin token: sgt_")


def _modules_loaded_by(module: str) -> set[str]:
    script = f"import json, sys, {module}; print(json.dumps(list(sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", script], capture_output=True, check=True)
    return set(json.loads(loaded.stdout))


def test_the_cli_does_not_load_the_admin_app() -> None:
    """Every admin command starts the CLI: it must not pay for FastAPI and SQLAlchemy; `sim` and
    `bench` (started by the hundred in tests) not even for pydantic."""
    admin = _modules_loaded_by("sluicegate.cli.parser")
    assert "sluicegate.cli.pool_options" in admin
    assert not {"fastapi", "sqlalchemy", "starlette"} & admin
    native = _modules_loaded_by("sluicegate.cli")
    assert "sluicegate.cli.native" in native
    assert not {"pydantic", "httpx", "control"} & native
