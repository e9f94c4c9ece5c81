"""`sluicegate tenants|keys|providers|pools|routes ...`: the common admin operations over the
admin API (httpx), printing JSON. Secrets are never taken on the command line (where `ps` and
shell history would keep them): credentials come from an environment variable or stdin.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
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
    return "POST", "/v1/admin/tenants", body, {}


def tenants_list(a: argparse.Namespace) -> Any:
    return "GET", "/v1/admin/tenants", None, _query(a, "status", "limit", "cursor")


def tenants_show(a: argparse.Namespace) -> Any:
    return "GET", f"/v1/admin/tenants/{a.id}", None, {}


def tenants_update(a: argparse.Namespace) -> Any:
    body: dict[str, Any] = {}
    _set(body, a, "name", *_LIMIT_OPTIONS)
    return "PATCH", f"/v1/admin/tenants/{a.id}", body, {}


def tenants_disable(a: argparse.Namespace) -> Any:
    return "PATCH", f"/v1/admin/tenants/{a.id}", {"status": "disabled"}, {}


def tenants_enable(a: argparse.Namespace) -> Any:
    return "PATCH", f"/v1/admin/tenants/{a.id}", {"status": "active"}, {}


def tenants_token(a: argparse.Namespace) -> Any:
    return "POST", f"/v1/admin/tenants/{a.id}/tokens", {"name": a.name}, {}


def keys_create(a: argparse.Namespace) -> Any:
    body: dict[str, Any] = {"tenant_id": a.tenant}
    _set(body, a, "name", "models", "priority", "expires_at", *_LIMIT_OPTIONS)
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
    return "PATCH", f"/v1/admin/keys/{a.id}", body, {}


def keys_rotate(a: argparse.Namespace) -> Any:
    return "POST", f"/v1/admin/keys/{a.id}/rotate", {"overlap_seconds": a.overlap}, {}


def keys_revoke(a: argparse.Namespace) -> Any:
    return "POST", f"/v1/admin/keys/{a.id}/revoke", None, {}


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
    _set(body, a, "max_output_tokens")
    return "POST", "/v1/admin/routes", body, {}


def routes_list(a: argparse.Namespace) -> Any:
    return "GET", "/v1/admin/routes", None, _query(a, "pool", "limit", "cursor")


def routes_show(a: argparse.Namespace) -> Any:
    return "GET", f"/v1/admin/routes/{a.alias}", None, {}


# --- parsers -----------------------------------------------------------------------------------


def _connection_options() -> argparse.ArgumentParser:
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


def add_admin_commands(sub: Any) -> None:
    conn = _connection_options()

    tenants = sub.add_parser("tenants", help="create, list, show, update, disable tenants")
    t = tenants.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = _command(t, "create", tenants_create, conn, "create a tenant")
    p.add_argument("--id", default=_UNSET, help="chosen id (generated if absent)")
    p.add_argument("--name", required=True)
    _limits(p)
    p = _command(t, "list", tenants_list, conn, "list tenants")
    p.add_argument("--status", choices=["active", "disabled"])
    _page(p)
    _command(t, "show", tenants_show, conn, "show a tenant").add_argument("id")
    p = _command(t, "update", tenants_update, conn, "change a tenant's name or limits")
    p.add_argument("id")
    p.add_argument("--name", default=_UNSET)
    _limits(p)
    _command(t, "disable", tenants_disable, conn, "disable a tenant and its keys").add_argument(
        "id"
    )
    _command(t, "enable", tenants_enable, conn, "enable a tenant again").add_argument("id")
    p = _command(t, "token", tenants_token, conn, "create a tenant-scoped admin token")
    p.add_argument("id")
    p.add_argument("--name", required=True)

    keys = sub.add_parser("keys", help="create, list, show, update, rotate, revoke keys")
    k = keys.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = _command(k, "create", keys_create, conn, "create a key (printed once)")
    p.add_argument("--tenant", required=True)
    _key_settings(p)
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
    p = _command(k, "rotate", keys_rotate, conn, "issue a new secret (printed once)")
    p.add_argument("id")
    p.add_argument(
        "--overlap", type=int, default=0, help="seconds the old key keeps working (default 0)"
    )
    _command(k, "revoke", keys_revoke, conn, "revoke a key").add_argument("id")

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

    routes = sub.add_parser("routes", help="create, list and show routes")
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
    p = _command(ro, "list", routes_list, conn, "list routes")
    p.add_argument("--pool")
    _page(p)
    _command(ro, "show", routes_show, conn, "show a route").add_argument("alias")


ADMIN_COMMANDS = ("tenants", "keys", "providers", "pools", "routes")


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
        print(
            "sluicegate: no admin token: set SLUICEGATE_ADMIN_TOKEN or pass --token",
            file=sys.stderr,
        )
        return 2
    try:
        method, path, body, query = args.handler(args)
    except CliError as e:
        print(f"sluicegate: {e}", file=sys.stderr)
        return 2
    url = args.admin_url.rstrip("/") + path
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
