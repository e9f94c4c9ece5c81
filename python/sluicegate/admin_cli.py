"""`sluicegate tenants|keys|providers|pools|routes|drills|usage ...`: the common admin operations
over the admin API (httpx), printing JSON (a key's usage export: its CSV as it comes); and
`sluicegate drill`, which starts a drill, watches the route's traffic every second and ends it.
Secrets are never taken on the command line (where `ps` and shell history would keep them):
credentials come from an environment variable or stdin.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx

DEFAULT_ADMIN_URL = "http://127.0.0.1:8081"

Handler = Callable[[argparse.Namespace], tuple[str, str, dict[str, Any] | None, dict[str, Any]]]


class CliError(Exception):
    """A message for the operator; the process exits non-zero."""


# --- argument types ----------------------------------------------------------------------------


def optional_int(text: str) -> int | None:
    """An integer, or `none` to clear a limit."""
    if text.lower() == "none":
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer or 'none', got {text!r}") from None


def model_list(text: str) -> list[str] | None:
    """Comma-separated aliases; `all` (every route) clears the allowlist."""
    if text.lower() == "all":
        return None
    return [part.strip() for part in text.split(",") if part.strip()]


def member_spec(text: str) -> dict[str, Any]:
    """PROVIDER[:WEIGHT[:MAX_CONCURRENCY]]."""
    parts = text.split(":")
    if not parts[0] or len(parts) > 3:
        raise argparse.ArgumentTypeError("expected PROVIDER[:WEIGHT[:MAX_CONCURRENCY]]")
    member: dict[str, Any] = {"provider_id": parts[0]}
    try:
        if len(parts) > 1 and parts[1]:
            member["weight"] = int(parts[1])
        if len(parts) > 2 and parts[2]:
            member["max_concurrency"] = int(parts[2])
    except ValueError:
        raise argparse.ArgumentTypeError("weight and max concurrency must be integers") from None
    return member


def word_list(text: str) -> list[str]:
    """Comma-separated words (an empty string is an empty list)."""
    return [part.strip() for part in text.split(",") if part.strip()]


def target_spec(text: str) -> dict[str, str]:
    """POOL:MODEL (the model may itself contain ':')."""
    pool, sep, model = text.partition(":")
    if not sep or not pool or not model:
        raise argparse.ArgumentTypeError("expected POOL:MODEL")
    return {"pool": pool, "model": model}


# --- request building --------------------------------------------------------------------------

_LIMIT_OPTIONS = ("rpm", "tpm", "max_concurrency", "rpm_burst", "tpm_burst")
_TIMEOUT_OPTIONS = ("connect_ms", "first_byte_ms", "idle_ms", "total_ms")

# Pool policy options: option -> (where it goes in the request body, type, help).
_POLICY_OPTIONS: dict[str, tuple[tuple[str, ...], Callable[[str], Any], str]] = {
    "max-inflight": (
        ("admission", "max_inflight"),
        optional_int,
        "requests at the upstreams at once ('none': the members' max concurrency summed)",
    ),
    "interactive-max-depth": (("admission", "interactive", "max_depth"), int, "lane size"),
    "interactive-max-wait-ms": (("admission", "interactive", "max_wait_ms"), int, "lane wait"),
    "interactive-weight": (("admission", "interactive", "weight"), int, "share of freed slots"),
    "batch-max-depth": (("admission", "batch", "max_depth"), int, "lane size"),
    "batch-max-wait-ms": (("admission", "batch", "max_wait_ms"), int, "lane wait"),
    "batch-weight": (("admission", "batch", "weight"), int, "share of freed slots"),
    "tenant-share": (("admission", "tenant_share"), float, "largest share of a lane per tenant"),
    "keepalive-ms": (("admission", "keepalive_ms"), int, "SSE keep-alives to queued streams"),
    "retry-max-attempts": (("retry", "max_attempts"), int, "attempts, the first included"),
    "retry-backoff-base-ms": (("retry", "backoff_base_ms"), int, "full-jitter backoff base"),
    "retry-backoff-cap-ms": (("retry", "backoff_cap_ms"), int, "backoff cap"),
    "retry-budget-ratio": (("retry", "budget_ratio"), float, "retries per request"),
    "retry-budget-min-per-second": (("retry", "budget_min_per_second"), float, "retry floor"),
    "retry-on": (
        ("retry", "retry_on"),
        word_list,
        "comma-separated: connect, reset, timeout, 429, 5xx codes",
    ),
    "retry-max-retry-after-ms": (
        ("retry", "max_retry_after_ms"),
        int,
        "longest upstream retry-after waited for",
    ),
    "ejection-consecutive-failures": (
        ("ejection", "consecutive_failures"),
        int,
        "failures in a row that eject a member (0: never)",
    ),
    "ejection-base-ms": (("ejection", "base_ms"), int, "first ejection, doubling after"),
    "ejection-max-ms": (("ejection", "max_ms"), int, "longest ejection"),
    "ejection-max-percent": (("ejection", "max_ejected_percent"), int, "of the members at once"),
    "health-check-path": (("health_check", "path"), str, "turns checks on, e.g. /models"),
    "health-check-interval-ms": (("health_check", "interval_ms"), int, "between checks"),
    "health-check-timeout-ms": (("health_check", "timeout_ms"), int, "of one check"),
    "health-check-unhealthy-after": (
        ("health_check", "unhealthy_after"),
        int,
        "failed checks that take a member out",
    ),
}


# Default of options that are sent only when given (None is a value: it clears a limit).
_UNSET: Any = object()


def _set(body: dict[str, Any], args: argparse.Namespace, *names: str) -> None:
    for name in names:
        value = getattr(args, name, _UNSET)
        if value is not _UNSET:
            body[name] = value


def _policies(body: dict[str, Any], args: argparse.Namespace) -> None:
    """Pool timeouts and policy options given, nested as the API takes them."""
    timeouts: dict[str, Any] = {}
    _set(timeouts, args, *_TIMEOUT_OPTIONS)
    if timeouts:
        body["timeouts"] = timeouts
    for option, (path, _, _) in _POLICY_OPTIONS.items():
        value = getattr(args, option.replace("-", "_"), _UNSET)
        if value is _UNSET:
            continue
        node = body
        for step in path[:-1]:
            node = node.setdefault(step, {})
        node[path[-1]] = value
    if getattr(args, "no_health_check", False):
        if "health_check" in body:
            raise CliError("--no-health-check cannot go with --health-check-* options")
        body["health_check"] = None


def _quota(body: dict[str, Any], args: argparse.Namespace) -> None:
    """`quota` as the API takes it: an object of the parts given (sent whole: it replaces the
    quota in force), or null with `--no-quota`."""
    quota: dict[str, Any] = {}
    _set(quota, args, "quota_period", "quota_tokens", "quota_cost_micros")
    if getattr(args, "no_quota", False):
        if quota:
            raise CliError("--no-quota cannot go with --quota-* options")
        body["quota"] = None
    elif quota:
        body["quota"] = {name.removeprefix("quota_"): value for name, value in quota.items()}


def _query(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    out = {}
    for name in names:
        value = getattr(args, name, None)
        if value is not None and value is not _UNSET:
            out[name] = value
    return out


def _credential(args: argparse.Namespace) -> str | None:
    if args.credential_env is not None:
        value = os.environ.get(args.credential_env)
        if not value:
            raise CliError(f"environment variable {args.credential_env} is empty or not set")
        return value
    if args.credential_stdin:
        value = sys.stdin.readline().strip()
        if not value:
            raise CliError("no credential on stdin")
        return value
    return None


def tenants_create(a: argparse.Namespace) -> Any:
    body: dict[str, Any] = {"name": a.name}
    _set(body, a, "id", *_LIMIT_OPTIONS)
    _quota(body, a)
    return "POST", "/v1/admin/tenants", body, {}


def tenants_list(a: argparse.Namespace) -> Any:
    return "GET", "/v1/admin/tenants", None, _query(a, "status", "limit", "cursor")


def tenants_show(a: argparse.Namespace) -> Any:
    return "GET", f"/v1/admin/tenants/{a.id}", None, {}


def tenants_update(a: argparse.Namespace) -> Any:
    body: dict[str, Any] = {}
    _set(body, a, "name", *_LIMIT_OPTIONS)
    _quota(body, a)
    return "PATCH", f"/v1/admin/tenants/{a.id}", body, {}


def tenants_disable(a: argparse.Namespace) -> Any:
    return "PATCH", f"/v1/admin/tenants/{a.id}", {"status": "disabled"}, {}


def tenants_enable(a: argparse.Namespace) -> Any:
    return "PATCH", f"/v1/admin/tenants/{a.id}", {"status": "active"}, {}


def tenants_token(a: argparse.Namespace) -> Any:
    return "POST", f"/v1/admin/tenants/{a.id}/tokens", {"name": a.name}, {}


def tenants_quota(a: argparse.Namespace) -> Any:
    return "GET", f"/v1/admin/tenants/{a.id}/quota", None, {}


def tenants_quota_reset(a: argparse.Namespace) -> Any:
    return "POST", f"/v1/admin/tenants/{a.id}/quota/reset", None, {}


def keys_create(a: argparse.Namespace) -> Any:
    body: dict[str, Any] = {"tenant_id": a.tenant}
    _set(body, a, "name", "models", "priority", "expires_at", *_LIMIT_OPTIONS)
    _quota(body, a)
    return "POST", "/v1/admin/keys", body, {}


def keys_list(a: argparse.Namespace) -> Any:
    query = _query(a, "prefix", "status", "expires_before", "expires_after", "limit", "cursor")
    if a.tenant is not None:
        query["tenant_id"] = a.tenant
    return "GET", "/v1/admin/keys", None, query


def keys_show(a: argparse.Namespace) -> Any:
    return "GET", f"/v1/admin/keys/{a.id}", None, {}


def keys_update(a: argparse.Namespace) -> Any:
    body: dict[str, Any] = {}
    _set(body, a, "name", "models", "priority", "expires_at", "status", *_LIMIT_OPTIONS)
    _quota(body, a)
    return "PATCH", f"/v1/admin/keys/{a.id}", body, {}


def keys_rotate(a: argparse.Namespace) -> Any:
    return "POST", f"/v1/admin/keys/{a.id}/rotate", {"overlap_seconds": a.overlap}, {}


def keys_revoke(a: argparse.Namespace) -> Any:
    return "POST", f"/v1/admin/keys/{a.id}/revoke", None, {}


def keys_quota(a: argparse.Namespace) -> Any:
    return "GET", f"/v1/admin/keys/{a.id}/quota", None, {}


def keys_quota_reset(a: argparse.Namespace) -> Any:
    return "POST", f"/v1/admin/keys/{a.id}/quota/reset", None, {}


def _key_view(view: str, a: argparse.Namespace, *names: str) -> Any:
    query = _query(a, *names)
    if a.start is not None:
        query["from"] = a.start  # `from` is the API's name (a Python keyword here)
    return "GET", f"/v1/admin/keys/{a.key_id}/usage/{view}", None, query


def usage_series(a: argparse.Namespace) -> Any:
    return _key_view("series", a, "to", "granularity", "model")


def usage_models(a: argparse.Namespace) -> Any:
    return _key_view("models", a, "to")


def usage_latency(a: argparse.Namespace) -> Any:
    return _key_view("latency", a, "to")


def usage_export(a: argparse.Namespace) -> Any:
    return _key_view("export", a, "to")


def usage_list(a: argparse.Namespace) -> Any:
    names = ("tenant_id", "key_id", "model", "outcome", "since", "until", "limit", "cursor")
    return "GET", "/v1/admin/usage", None, _query(a, *names)


def providers_create(a: argparse.Namespace) -> Any:
    body: dict[str, Any] = {"kind": a.kind, "base_url": a.base_url, "internal": a.internal}
    _set(body, a, "id", "name")
    credential = _credential(a)
    if credential is not None:
        body["credential"] = credential
    return "POST", "/v1/admin/providers", body, {}


def providers_list(a: argparse.Namespace) -> Any:
    return "GET", "/v1/admin/providers", None, _query(a, "kind", "limit", "cursor")


def providers_show(a: argparse.Namespace) -> Any:
    return "GET", f"/v1/admin/providers/{a.id}", None, {}


def pools_create(a: argparse.Namespace) -> Any:
    body: dict[str, Any] = {"members": a.member}
    _set(body, a, "id", "name")
    _policies(body, a)
    return "POST", "/v1/admin/pools", body, {}


def pools_update(a: argparse.Namespace) -> Any:
    body: dict[str, Any] = {}
    _set(body, a, "name")
    if a.member is not None:
        body["members"] = a.member
    _policies(body, a)
    return "PATCH", f"/v1/admin/pools/{a.id}", body, {}


def pools_list(a: argparse.Namespace) -> Any:
    return "GET", "/v1/admin/pools", None, _query(a, "limit", "cursor")


def pools_show(a: argparse.Namespace) -> Any:
    return "GET", f"/v1/admin/pools/{a.id}", None, {}


def routes_create(a: argparse.Namespace) -> Any:
    body: dict[str, Any] = {"alias": a.alias, "chain": a.target}
    _set(body, a, "max_output_tokens", "slo_ttft_p95_ms")
    return "POST", "/v1/admin/routes", body, {}


def routes_update(a: argparse.Namespace) -> Any:
    body: dict[str, Any] = {}
    if a.target is not None:
        body["chain"] = a.target
    _set(body, a, "max_output_tokens", "slo_ttft_p95_ms")
    return "PATCH", f"/v1/admin/routes/{a.alias}", body, {}


def routes_list(a: argparse.Namespace) -> Any:
    return "GET", "/v1/admin/routes", None, _query(a, "pool", "limit", "cursor")


def routes_show(a: argparse.Namespace) -> Any:
    return "GET", f"/v1/admin/routes/{a.alias}", None, {}


def drills_list(a: argparse.Namespace) -> Any:
    query = _query(a, "pool", "limit", "cursor")
    if a.active:
        query["active"] = "true"
    return "GET", "/v1/admin/drills", None, query


def drills_show(a: argparse.Namespace) -> Any:
    return "GET", f"/v1/admin/drills/{a.id}", None, {}


def drills_end(a: argparse.Namespace) -> Any:
    return "DELETE", f"/v1/admin/drills/{a.id}", None, {}


def duration(text: str) -> int:
    """Whole seconds: `90`, `60s`, `5m`, `1h`."""
    units = {"s": 1, "m": 60, "h": 3600}
    number, unit = (text[:-1], text[-1]) if text[-1:] in units else (text, "s")
    if not number.isdigit() or int(number) == 0:
        raise argparse.ArgumentTypeError(f"expected a duration like 60s, 5m or 1h, got {text!r}")
    return int(number) * units[unit]


# --- parsers -----------------------------------------------------------------------------------


def connection_options() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--admin-url",
        default=os.environ.get("SLUICEGATE_ADMIN_URL", DEFAULT_ADMIN_URL),
        help="admin API base URL (default: env SLUICEGATE_ADMIN_URL or %(default)s)",
    )
    parent.add_argument(
        "--token",
        default=None,
        help="admin token (default: env SLUICEGATE_ADMIN_TOKEN; prefer the environment)",
    )
    return parent


def _limits(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--rpm", type=optional_int, default=_UNSET, help="requests/minute ('none' clears)"
    )
    p.add_argument("--tpm", type=optional_int, default=_UNSET, help="tokens/minute ('none' clears)")
    p.add_argument(
        "--max-concurrency", type=optional_int, default=_UNSET, help="in flight ('none' clears)"
    )
    p.add_argument(
        "--rpm-burst",
        type=optional_int,
        default=_UNSET,
        help="requests at once (bucket size; 'none': the rpm)",
    )
    p.add_argument(
        "--tpm-burst",
        type=optional_int,
        default=_UNSET,
        help="tokens at once (bucket size; 'none': the tpm)",
    )


_SLO_HELP = "objective for the P95 of time to first token, read by `sluicegate doctor`"

_METAVARS: dict[Callable[[str], Any], str] = {float: "X", word_list: "A,B", str: "PATH"}


def _pool_settings(p: argparse.ArgumentParser) -> None:
    for name in ("connect-ms", "first-byte-ms", "idle-ms", "total-ms"):
        p.add_argument(f"--{name}", type=int, default=_UNSET, metavar="MS", help="timeout")
    for option, (_, kind, help_text) in _POLICY_OPTIONS.items():
        metavar = "MS" if option.endswith("-ms") else _METAVARS.get(kind, "N")
        p.add_argument(f"--{option}", type=kind, default=_UNSET, metavar=metavar, help=help_text)


def _page(p: argparse.ArgumentParser) -> None:
    p.add_argument("--limit", type=int, help="page size (at most 500)")
    p.add_argument("--cursor", help="next_cursor of the previous page")


def _command(
    group: Any, name: str, handler: Handler, parent: argparse.ArgumentParser, help_text: str
) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = group.add_parser(name, parents=[parent], help=help_text)
    p.set_defaults(handler=handler)
    return p


def _key_settings(p: argparse.ArgumentParser) -> None:
    p.add_argument("--name", default=_UNSET)
    p.add_argument(
        "--models", type=model_list, default=_UNSET, help="comma-separated aliases, or 'all'"
    )
    p.add_argument("--priority", choices=["interactive", "batch"], default=_UNSET)
    p.add_argument("--expires-at", default=_UNSET, help="ISO 8601 time (UTC without an offset)")
    _limits(p)


def _quota_options(p: argparse.ArgumentParser, update: bool) -> None:
    replaces = "; the quota is sent whole and replaces the one in force" if update else ""
    p.add_argument(
        "--quota-period",
        choices=["none", "daily", "monthly"],
        default=_UNSET,
        help="required with a quota: daily resets at 00:00 UTC, monthly on the first; none: one "
        "allowance counted from when it was set" + replaces,
    )
    p.add_argument(
        "--quota-tokens",
        type=int,
        default=_UNSET,
        metavar="N",
        help="prompt plus completion tokens per period",
    )
    p.add_argument(
        "--quota-cost-micros",
        type=int,
        default=_UNSET,
        metavar="N",
        help="cost per period, in micro-units of the prices' currency",
    )
    if update:
        p.add_argument("--no-quota", action="store_true", help="remove the quota")


_FROM_HELP = "start of the range (ISO 8601, inclusive; UTC without an offset)"
_TO_HELP = "end of the range (ISO 8601, exclusive; default now)"


def _usage_range(p: argparse.ArgumentParser, default: str) -> None:
    p.add_argument("key_id", metavar="KEY_ID", help="the key's id (not its secret)")
    p.add_argument(
        "--from", dest="start", metavar="TIME", help=f"{_FROM_HELP}; default: {default} before --to"
    )
    p.add_argument("--to", metavar="TIME", help=_TO_HELP)


def add_admin_commands(sub: Any) -> None:
    conn = connection_options()

    tenants = sub.add_parser(
        "tenants", help="create, list, show, update, disable tenants; their quotas"
    )
    t = tenants.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = _command(t, "create", tenants_create, conn, "create a tenant")
    p.add_argument("--id", default=_UNSET, help="chosen id (generated if absent)")
    p.add_argument("--name", required=True)
    _limits(p)
    _quota_options(p, update=False)
    p = _command(t, "list", tenants_list, conn, "list tenants")
    p.add_argument("--status", choices=["active", "disabled"])
    _page(p)
    _command(t, "show", tenants_show, conn, "show a tenant").add_argument("id")
    p = _command(t, "update", tenants_update, conn, "change a tenant's name, limits or quota")
    p.add_argument("id")
    p.add_argument("--name", default=_UNSET)
    _limits(p)
    _quota_options(p, update=True)
    _command(t, "disable", tenants_disable, conn, "disable a tenant and its keys").add_argument(
        "id"
    )
    _command(t, "enable", tenants_enable, conn, "enable a tenant again").add_argument("id")
    p = _command(t, "token", tenants_token, conn, "create a tenant-scoped admin token")
    p.add_argument("id")
    p.add_argument("--name", required=True)
    _command(
        t, "quota", tenants_quota, conn, "show a tenant's quota and its use this period"
    ).add_argument("id")
    _command(
        t, "quota-reset", tenants_quota_reset, conn, "count a tenant's quota again from now"
    ).add_argument("id")

    keys = sub.add_parser(
        "keys", help="create, list, show, update, rotate, revoke keys; their quotas"
    )
    k = keys.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = _command(k, "create", keys_create, conn, "create a key (printed once)")
    p.add_argument("--tenant", required=True)
    _key_settings(p)
    _quota_options(p, update=False)
    p = _command(k, "list", keys_list, conn, "list and search keys")
    p.add_argument("--tenant")
    p.add_argument("--prefix", help="start of the public prefix (sk-sg-...)")
    p.add_argument("--status", choices=["active", "disabled", "expired", "revoked"])
    p.add_argument("--expires-before")
    p.add_argument("--expires-after")
    _page(p)
    _command(k, "show", keys_show, conn, "show a key").add_argument("id")
    p = _command(k, "update", keys_update, conn, "change a key's settings")
    p.add_argument("id")
    p.add_argument("--status", choices=["active", "disabled"], default=_UNSET)
    _key_settings(p)
    _quota_options(p, update=True)
    p = _command(k, "rotate", keys_rotate, conn, "issue a new secret (printed once)")
    p.add_argument("id")
    p.add_argument(
        "--overlap", type=int, default=0, help="seconds the old key keeps working (default 0)"
    )
    _command(k, "revoke", keys_revoke, conn, "revoke a key").add_argument("id")
    _command(
        k, "quota", keys_quota, conn, "show a key's quota and its use this period"
    ).add_argument("id")
    _command(
        k, "quota-reset", keys_quota_reset, conn, "count a key's quota again from now"
    ).add_argument("id")

    providers = sub.add_parser("providers", help="register and list upstream providers")
    pr = providers.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = _command(pr, "create", providers_create, conn, "register an upstream provider")
    p.add_argument("--id", default=_UNSET)
    p.add_argument("--name", default=_UNSET)
    p.add_argument("--kind", choices=["openai", "anthropic"], required=True)
    p.add_argument("--base-url", required=True, help="with the version segment, e.g. .../v1")
    p.add_argument("--internal", action="store_true", help="allow internal addresses")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--credential-env", metavar="VAR", help="read the credential from $VAR")
    source.add_argument(
        "--credential-stdin", action="store_true", help="read the credential from stdin"
    )
    p = _command(pr, "list", providers_list, conn, "list providers")
    p.add_argument("--kind", choices=["openai", "anthropic"])
    _page(p)
    _command(pr, "show", providers_show, conn, "show a provider").add_argument("id")

    pools = sub.add_parser("pools", help="create, update, list and show pools")
    po = pools.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = _command(po, "create", pools_create, conn, "create a pool")
    p.add_argument("--id", default=_UNSET)
    p.add_argument("--name", default=_UNSET)
    p.add_argument(
        "--member",
        type=member_spec,
        action="append",
        required=True,
        metavar="PROVIDER[:WEIGHT[:MAX_CONCURRENCY]]",
        help="repeat for each member",
    )
    _pool_settings(p)
    p = _command(po, "update", pools_update, conn, "change a pool's members, timeouts, policies")
    p.add_argument("id")
    p.add_argument("--name", default=_UNSET)
    p.add_argument(
        "--member",
        type=member_spec,
        action="append",
        metavar="PROVIDER[:WEIGHT[:MAX_CONCURRENCY]]",
        help="repeat for each member; replaces the whole list",
    )
    _pool_settings(p)
    p.add_argument("--no-health-check", action="store_true", help="turn health checks off")
    p = _command(po, "list", pools_list, conn, "list pools")
    _page(p)
    _command(po, "show", pools_show, conn, "show a pool").add_argument("id")

    routes = sub.add_parser("routes", help="create, update, list and show routes")
    ro = routes.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = _command(ro, "create", routes_create, conn, "route a model alias to pools")
    p.add_argument("--alias", required=True, help="the model name clients ask for")
    p.add_argument(
        "--target",
        type=target_spec,
        action="append",
        required=True,
        metavar="POOL:MODEL",
        help="repeat for fallbacks, in order",
    )
    p.add_argument("--max-output-tokens", type=int, default=_UNSET)
    p.add_argument("--slo-ttft-p95-ms", type=int, default=_UNSET, help=_SLO_HELP)
    p = _command(ro, "update", routes_update, conn, "change a route's chain, limits or SLO")
    p.add_argument("alias")
    p.add_argument(
        "--target",
        type=target_spec,
        action="append",
        metavar="POOL:MODEL",
        help="repeat for fallbacks, in order; replaces the whole chain",
    )
    p.add_argument("--max-output-tokens", type=optional_int, default=_UNSET, help="'none' clears")
    p.add_argument(
        "--slo-ttft-p95-ms", type=optional_int, default=_UNSET, help=_SLO_HELP + "; 'none' clears"
    )
    p = _command(ro, "list", routes_list, conn, "list routes")
    p.add_argument("--pool")
    _page(p)
    _command(ro, "show", routes_show, conn, "show a route").add_argument("alias")

    drills = sub.add_parser("drills", help="list drills, end one (see also `sluicegate drill`)")
    dr = drills.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = _command(dr, "list", drills_list, conn, "list drills, newest first")
    p.add_argument("--pool")
    p.add_argument("--active", action="store_true", help="only drills still running")
    _page(p)
    _command(dr, "show", drills_show, conn, "show a drill").add_argument("id")
    _command(dr, "end", drills_end, conn, "end a drill now").add_argument("id")

    usage = sub.add_parser(
        "usage",
        help="a key's usage: series, totals per model, latency, CSV export; raw rows",
        description="A key's usage views (series and totals from the rollups, kept for ever; "
        "latency percentiles and the export from the raw rows, kept usage.raw_retention_days) "
        "and the raw rows of all keys. Tenant tokens see their own keys only.",
    )
    us = usage.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = _command(us, "series", usage_series, conn, "a key's usage per minute, hour or day")
    _usage_range(p, "60 minutes, 24 hours or 30 days (by granularity)")
    p.add_argument(
        "--granularity", choices=["minute", "hour", "day"], help="bucket size (default: hour)"
    )
    p.add_argument("--model", help="only this model (the alias clients asked for)")
    p = _command(us, "models", usage_models, conn, "a key's usage totals per model")
    _usage_range(p, "24 hours")
    p = _command(us, "latency", usage_latency, conn, "a key's TTFT and TPOT P50/P95/P99")
    _usage_range(p, "24 hours")
    p = _command(us, "export", usage_export, conn, "a key's raw usage rows as CSV")
    _usage_range(p, "24 hours")
    p.add_argument("-o", "--output", metavar="FILE", help="write the CSV to FILE (default: stdout)")
    p.set_defaults(stream_csv=True)
    p = _command(us, "list", usage_list, conn, "list raw usage rows, newest first")
    p.add_argument("--tenant-id", help="only this tenant's rows")
    p.add_argument("--key-id", help="only this key's rows")
    p.add_argument("--model", help="only this model (the alias clients asked for)")
    p.add_argument(
        "--outcome",
        help="only rows that ended this way",
        choices=["complete", "client_cancelled", "upstream_error", "timeout", "interrupted"],
    )
    p.add_argument("--since", metavar="TIME", help="started at or after (ISO 8601)")
    p.add_argument("--until", metavar="TIME", help="started before (ISO 8601)")
    _page(p)

    p = sub.add_parser(
        "drill",
        parents=[conn],
        help="force a member or a pool of a route out for a while and watch the traffic move",
        description="Start a drill, print the route's requests per upstream and its error rate "
        "every second, end the drill when the time is up (or on Ctrl-C) and print a summary.",
    )
    p.add_argument("--route", required=True, help="the route to watch (the model alias)")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--eject",
        metavar="[POOL:]MEMBER",
        help="a member of one of the route's pools (name the pool if several have it)",
    )
    target.add_argument("--pool", help="one of the route's pools, out as a whole")
    p.add_argument(
        "--for",
        dest="seconds",
        type=duration,
        required=True,
        metavar="DURATION",
        help="how long: 90, 60s, 5m, 1h",
    )
    p.add_argument("--reason", help="recorded with the drill and in the audit log")
    p.add_argument(
        "--allow-outage",
        action="store_true",
        help="drill even if a route would have no path left to serve it",
    )


ADMIN_COMMANDS = ("tenants", "keys", "providers", "pools", "routes", "drills", "usage")


# --- running -----------------------------------------------------------------------------------


def _error_text(response: httpx.Response) -> str:
    try:
        error = response.json()["error"]
        lines = [f"HTTP {response.status_code} {error['code']}: {error['message']}"]
        lines += [f"  {f['field']}: {f['message']}" for f in error.get("fields", [])]
        return "\n".join(lines)
    except (ValueError, KeyError, TypeError):
        return f"HTTP {response.status_code}: {response.text[:200]}"


def run_admin(args: argparse.Namespace) -> int:
    token = args.token or os.environ.get("SLUICEGATE_ADMIN_TOKEN")
    if not token:
        return no_token()
    try:
        method, path, body, query = args.handler(args)
    except CliError as e:
        print(f"sluicegate: {e}", file=sys.stderr)
        return 2
    url = args.admin_url.rstrip("/") + path
    if getattr(args, "stream_csv", False):
        return _export(args, url, query, token)
    try:
        response = httpx.request(
            method,
            url,
            json=body,
            params=query,
            headers={"Authorization": f"Bearer {token}"},
            timeout=30.0,
        )
    except httpx.HTTPError as e:
        print(f"sluicegate: cannot reach the admin API at {args.admin_url}: {e}", file=sys.stderr)
        return 1
    if response.status_code >= 400:
        print(f"sluicegate: {_error_text(response)}", file=sys.stderr)
        return 1
    if response.status_code != 204:
        try:
            json.dump(response.json(), sys.stdout, indent=2)
            sys.stdout.write("\n")
            sys.stdout.flush()
        except BrokenPipeError:
            # The reader (`| head`) went away: that is not an error of this command.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _export(args: argparse.Namespace, url: str, query: dict[str, Any], token: str) -> int:
    """Stream a CSV answer to stdout or to `--output` (written to FILE.part, renamed when complete:
    a failed export never leaves a file that looks whole)."""
    target: str | None = args.output
    partial = f"{target}.part" if target else None
    receiving = False
    try:
        with httpx.stream(
            "GET", url, params=query, headers={"Authorization": f"Bearer {token}"}, timeout=30.0
        ) as response:
            if response.status_code >= 400:
                response.read()
                print(f"sluicegate: {_error_text(response)}", file=sys.stderr)
                return 1
            receiving = True
            with (
                open(partial, "wb") if partial else contextlib.nullcontext(sys.stdout.buffer) as out
            ):
                for chunk in response.iter_bytes():
                    out.write(chunk)
                out.flush()
        if partial and target:
            os.replace(partial, target)
        return 0
    except (httpx.HTTPError, OSError) as e:
        if partial:
            with contextlib.suppress(OSError):
                os.remove(partial)
        if isinstance(e, OSError):
            what = f"cannot write {target or 'stdout'}"
        elif receiving:
            what = "the export was cut short"
        else:
            what = f"cannot reach the admin API at {args.admin_url}"
        print(f"sluicegate: {what}: {e}", file=sys.stderr)
        return 1


# --- `sluicegate drill`: start, watch every second, end, summarize -----------------------------

# Counters of one reading: (pool, upstream) -> status class -> requests, and refusals by reason.
Reading = tuple[dict[tuple[str, str], dict[str, int]], dict[str, int]]


class Api:
    """The admin API with a token; error answers become `CliError` in the API's words."""

    def __init__(self, url: str, token: str) -> None:
        self._client = httpx.Client(
            base_url=url.rstrip("/"), headers={"Authorization": f"Bearer {token}"}, timeout=10.0
        )

    def call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
    ) -> Any:
        response = self._client.request(method, path, json=body, params=params)
        if response.status_code >= 400:
            raise CliError(_error_text(response))
        return response.json()

    def close(self) -> None:
        self._client.close()


def _drill_target(api: Api, route: str, eject: str | None, pool: str | None) -> dict[str, str]:
    if pool is not None:
        return {"pool": pool}
    assert eject is not None
    named_pool, sep, member = eject.rpartition(":")
    if sep:
        return {"pool": named_pool, "member": member}
    chain = [t["pool"] for t in api.call("GET", f"/v1/admin/routes/{route}")["chain"]]
    having = [
        p
        for p in chain
        if member in {m["id"] for m in api.call("GET", f"/v1/admin/pools/{p}")["members"]}
    ]
    if not having:
        raise CliError(f"no pool of route {route!r} ({', '.join(chain)}) has a member {member!r}")
    if len(having) > 1:
        raise CliError(
            f"pools {', '.join(having)} of route {route!r} all have a member {member!r}: "
            f"name one, e.g. --eject {having[0]}:{member}"
        )
    return {"pool": having[0], "member": member}


def _reading(api: Api, drill_id: str) -> Reading:
    traffic = api.call("GET", f"/v1/admin/drills/{drill_id}/traffic")
    upstreams = {(u["pool"], u["upstream"]): dict(u["requests"]) for u in traffic["upstreams"]}
    return upstreams, dict(traffic["rejections"])


def _delta(before: Reading, after: Reading) -> tuple[dict[str, int], int, int, int]:
    """Requests per upstream, total, errors (4xx/5xx answers) and gateway refusals between two
    readings."""
    per_upstream: dict[str, int] = {}
    total = errors = 0
    for leg, classes in after[0].items():
        old = before[0].get(leg, {})
        diff = {c: n - old.get(c, 0) for c, n in classes.items()}
        per_upstream[f"{leg[0]}/{leg[1]}"] = sum(diff.values())
        total += sum(diff.values())
        errors += diff.get("4xx", 0) + diff.get("5xx", 0)
    for leg in before[0]:
        per_upstream.setdefault(f"{leg[0]}/{leg[1]}", 0)
    refused = sum(n - before[1].get(reason, 0) for reason, n in after[1].items())
    return per_upstream, total, errors, refused


def _rate(errors: int, total: int) -> str:
    return f"{100 * errors / total:.1f}%" if total else "-"


def _line(elapsed: float, before: Reading, after: Reading) -> str:
    per_upstream, total, errors, refused = _delta(before, after)
    legs = "  ".join(f"{name} {n}" for name, n in per_upstream.items())
    return (
        f"+{elapsed:.0f}s  {legs}  | {total} requests, {errors} errors "
        f"({_rate(errors, total)}), {refused} refused by the gateway"
    )


def _summary(first: Reading, last: Reading) -> str:
    per_upstream, total, errors, refused = _delta(first, last)
    width = max((len(name) for name in per_upstream), default=0)
    lines = ["requests per upstream during the drill:"]
    lines += [f"  {name:<{width}}  {n}" for name, n in per_upstream.items()]
    lines.append(
        f"errors: {errors} of {total} requests ({_rate(errors, total)}); "
        f"refused by the gateway (all routes): {refused}"
    )
    return "\n".join(lines)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


# The last reading is taken this long before the drill's end (counted from just before it was
# asked for), so that no request served after the target is back counts as served during the
# drill; its end is recorded this long after it (counted from the answer that started it).
READ_MARGIN_S = 0.2
END_MARGIN_S = 0.1


def _watch(
    api: Api, drill_id: str, t0: float, seconds: int, first: Reading
) -> tuple[Reading, bool]:
    """Print one line a second, `t0` (just before the drill started) being zero, until the time
    is up or Ctrl-C/SIGTERM; returns the last reading and whether the watch was interrupted."""
    last = first
    tick = t0
    end = t0 + seconds - READ_MARGIN_S
    try:
        while tick < end:
            tick = min(tick + 1.0, end)
            time.sleep(max(0.0, tick - time.monotonic()))
            current = _reading(api, drill_id)
            print(_line(time.monotonic() - t0, last, current), flush=True)
            last = current
        return last, False
    except KeyboardInterrupt:
        return last, True


@contextlib.contextmanager
def _signals_deferred() -> Iterator[list[int]]:
    """Ctrl-C and SIGTERM are noted, not acted on, while a drill is being started or ended (a
    drill started must be seen through to its end); the list holds the signals that came."""
    came: list[int] = []
    sigs = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, lambda signum, frame: came.append(signum)) for sig in sigs}
    try:
        yield came
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def no_token() -> int:
    print("sluicegate: no admin token: set SLUICEGATE_ADMIN_TOKEN or pass --token", file=sys.stderr)
    return 2


def run_drill(args: argparse.Namespace) -> int:
    token = args.token or os.environ.get("SLUICEGATE_ADMIN_TOKEN")
    if not token:
        return no_token()
    api = Api(args.admin_url, token)
    previous_term = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        return _drill(api, args)
    except KeyboardInterrupt:  # before any drill started
        print("sluicegate drill: interrupted; no drill was started", file=sys.stderr)
        return 130
    except CliError as e:
        print(f"sluicegate drill: {e}", file=sys.stderr)
        return 1
    except httpx.HTTPError as e:
        where = args.admin_url
        print(f"sluicegate drill: cannot reach the admin API at {where}: {e}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous_term)
        api.close()


def _drill(api: Api, args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"route": args.route, "seconds": args.seconds}
    body |= _drill_target(api, args.route, args.eject, args.pool)
    if args.reason:
        body["reason"] = args.reason
    if args.allow_outage:
        body["allow_outage"] = True
    t0 = time.monotonic()  # the core's drill starts after t0 ...
    with _signals_deferred() as came:
        drill = api.call("POST", "/v1/admin/drills", body)
    t1 = time.monotonic()  # ... and before t1
    if drill["member"]:
        what = f"member {drill['member']} of pool {drill['pool']}"
    else:
        what = f"pool {drill['pool']}"
    print(
        f"drill {drill['id']}: {what} out of route {args.route} for {args.seconds}s "
        f"(until {drill['ends_at']}); Ctrl-C ends it early",
        flush=True,
    )
    interrupted, failed = bool(came), False
    first: Reading | None = None
    last: Reading | None = None
    try:
        first = last = _reading(api, drill["id"])
        if not interrupted:
            last, interrupted = _watch(api, drill["id"], t0, args.seconds, first)
    except KeyboardInterrupt:
        interrupted = True
    except (CliError, httpx.HTTPError) as e:
        print(f"sluicegate drill: reading the traffic failed: {e}", file=sys.stderr)
        failed = True
    # Whatever happened above, the target goes back in.
    with _signals_deferred():
        if interrupted and first is not None:
            with contextlib.suppress(CliError, httpx.HTTPError):
                last = _reading(api, drill["id"])
        elif not failed:
            # The time is up: the core lets the target back in by itself; record the end.
            time.sleep(max(0.0, t1 + args.seconds + END_MARGIN_S - time.monotonic()))
        try:
            ended = api.call("DELETE", f"/v1/admin/drills/{drill['id']}")
        except (CliError, httpx.HTTPError) as e:
            print(
                f"sluicegate drill: could not end drill {drill['id']}: {e}\n"
                f"it ends by itself at {drill['ends_at']}, or run: "
                f"sluicegate drills end {drill['id']}",
                file=sys.stderr,
            )
            return 1
    how = "ended early (interrupted)" if interrupted else "ended"
    lasted = time.monotonic() - t0 if interrupted else args.seconds
    print(f"drill {ended['id']} {how} after {lasted:.1f}s; the target is back in service")
    if first is not None and last is not None:
        print(_summary(first, last), flush=True)
    if interrupted:
        return 130
    return 1 if failed else 0
