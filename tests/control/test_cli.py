"""The admin CLI: each command becomes the right request; errors are printed, exit non-zero."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from sluicegate import admin_cli
from sluicegate.cli import build_parser, main


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
    def fake(method: str, url: str, **kwargs: Any) -> httpx.Response:
        assert kwargs["headers"] == {"Authorization": "Bearer sgt_token"}
        error = {
            "code": "validation_error",
            "message": "bad",
            "fields": [{"field": "rpm", "message": "too high"}],
        }
        return httpx.Response(422, json={"error": error})

    monkeypatch.setattr(admin_cli.httpx, "request", fake)
    monkeypatch.setenv("SLUICEGATE_ADMIN_TOKEN", "sgt_token")
    assert main(["tenants", "update", "acme", "--rpm", "9"]) == 1
    err = capsys.readouterr().err
    assert "HTTP 422 validation_error: bad" in err and "rpm: too high" in err


def test_success_prints_json(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(
        admin_cli.httpx, "request", lambda *a, **k: httpx.Response(200, json={"id": "acme"})
    )
    assert main(["tenants", "show", "acme", "--token", "sgt_x"]) == 0
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
    target = admin_cli._drill_target
    assert target(api, "chat", "a", None) == {"pool": "primary", "member": "a"}
    assert target(api, "chat", "c", None) == {"pool": "backup", "member": "c"}
    assert target(api, "chat", "backup:b", None) == {"pool": "backup", "member": "b"}
    assert target(api, "chat", None, "primary") == {"pool": "primary"}
    with pytest.raises(admin_cli.CliError, match="--eject primary:b"):
        target(api, "chat", "b", None)
    with pytest.raises(admin_cli.CliError, match="has a member 'z'"):
        target(api, "chat", "z", None)


def test_drill_lines_difference_the_counters() -> None:
    before: Any = ({("p", "a"): {"2xx": 10}, ("q", "b"): {"2xx": 1}}, {"overloaded": 2})
    after: Any = (
        {("p", "a"): {"2xx": 10}, ("q", "b"): {"2xx": 9, "5xx": 1, "4xx": 2}},
        {"overloaded": 3, "no_upstream": 1},
    )
    line = admin_cli._line(1.02, before, after)
    assert line == "+1s  p/a 0  q/b 11  | 11 requests, 3 errors (27.3%), 2 refused by the gateway"
    summary = admin_cli._summary(before, after)
    assert "  p/a  0\n  q/b  11\n" in summary
    assert summary.endswith(
        "errors: 3 of 11 requests (27.3%); refused by the gateway (all routes): 2"
    )
