"""`sluicegate drill`: start a drill, print the route's requests per upstream and its error rate
every second, end the drill when the time is up (or on Ctrl-C/SIGTERM) and print a summary."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import time
from collections.abc import Iterator
from typing import Any

from sluicegate.cli.client import AdminClient, CliError, run
from sluicegate.cli.options import duration

# Counters of one reading: (pool, upstream) -> status class -> requests, and refusals by reason.
Reading = tuple[dict[tuple[str, str], dict[str, int]], dict[str, int]]

# The last reading is taken this long before the drill's end (counted from just before it was
# asked for), so that no request served after the target is back counts as served during the
# drill; its end is recorded this long after it (counted from the answer that started it).
READ_MARGIN_S = 0.2
# How soon a noted Ctrl-C or SIGTERM cuts a wait short.
SIGNAL_POLL_S = 0.05
END_MARGIN_S = 0.1


def drill_target(
    api: AdminClient, route: str, eject: str | None, pool: str | None
) -> dict[str, str]:
    """The pool (and member) a drill takes out: a bare member is looked up in the route's pools."""
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


def _reading(api: AdminClient, drill_id: str) -> Reading:
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


def progress_line(elapsed: float, before: Reading, after: Reading) -> str:
    per_upstream, total, errors, refused = _delta(before, after)
    legs = "  ".join(f"{name} {n}" for name, n in per_upstream.items())
    return (
        f"+{elapsed:.0f}s  {legs}  | {total} requests, {errors} errors "
        f"({_rate(errors, total)}), {refused} refused by the gateway"
    )


def summary(first: Reading, last: Reading) -> str:
    per_upstream, total, errors, refused = _delta(first, last)
    width = max((len(name) for name in per_upstream), default=0)
    lines = ["requests per upstream during the drill:"]
    lines += [f"  {name:<{width}}  {n}" for name, n in per_upstream.items()]
    lines.append(
        f"errors: {errors} of {total} requests ({_rate(errors, total)}); "
        f"refused by the gateway (all routes): {refused}"
    )
    return "\n".join(lines)


def _sleep_unless(came: list[int], seconds: float) -> bool:
    """Sleep up to `seconds`; True as soon as a signal has come."""
    end = time.monotonic() + seconds
    while not came:
        left = end - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(left, SIGNAL_POLL_S))
    return True


def _watch(
    api: AdminClient, drill_id: str, t0: float, seconds: int, first: Reading, came: list[int]
) -> tuple[Reading, bool]:
    """Print one line a second, `t0` (just before the drill started) being zero, until the time
    is up or Ctrl-C/SIGTERM came; returns the last reading and whether the watch was cut short.
    A signal is only noted: a reading in flight finishes (an exception raised inside the HTTP
    client could leave its connection pool unusable for the call that ends the drill)."""
    last = first
    tick = t0
    end = t0 + seconds - READ_MARGIN_S
    while tick < end:
        tick = min(tick + 1.0, end)
        if _sleep_unless(came, tick - time.monotonic()):
            return last, True
        current = _reading(api, drill_id)
        print(progress_line(time.monotonic() - t0, last, current), flush=True)
        last = current
    return last, bool(came)


@contextlib.contextmanager
def _signals_deferred() -> Iterator[list[int]]:
    """Ctrl-C and SIGTERM are noted, not acted on, from the moment a drill is being started to
    its end (a drill started must be seen through to its end); the list holds the signals that
    came."""
    came: list[int] = []
    sigs = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, lambda signum, frame: came.append(signum)) for sig in sigs}
    try:
        yield came
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def run_drill(args: argparse.Namespace) -> int:
    def watched(api: AdminClient) -> int:
        previous_term = signal.signal(signal.SIGTERM, _raise_interrupt)
        try:
            return _drill(api, args)
        except KeyboardInterrupt:  # before any drill started
            print("sluicegate drill: interrupted; no drill was started", file=sys.stderr)
            return 130
        finally:
            signal.signal(signal.SIGTERM, previous_term)

    return run(args, watched, timeout=10.0)


def _drill(api: AdminClient, args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"route": args.route, "seconds": args.seconds}
    body |= drill_target(api, args.route, args.eject, args.pool)
    if args.reason:
        body["reason"] = args.reason
    if args.allow_outage:
        body["allow_outage"] = True
    t0 = time.monotonic()  # the core's drill starts after t0 ...
    with _signals_deferred() as came:
        drill = api.call("POST", "/v1/admin/drills", body)
        t1 = time.monotonic()  # ... and before t1
        return _watch_and_end(api, args, drill, (t0, t1), came)


def _watch_and_end(
    api: AdminClient,
    args: argparse.Namespace,
    drill: dict[str, Any],
    started: tuple[float, float],
    came: list[int],
) -> int:
    t0, t1 = started
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
            last, interrupted = _watch(api, drill["id"], t0, args.seconds, first, came)
    except CliError as e:
        print(f"sluicegate drill: reading the traffic failed: {e}", file=sys.stderr)
        failed = True
    # Whatever happened above, the target goes back in.
    if interrupted and first is not None:
        with contextlib.suppress(CliError):
            last = _reading(api, drill["id"])
    elif not failed:
        # The time is up: the core lets the target back in by itself; record the end.
        time.sleep(max(0.0, t1 + args.seconds + END_MARGIN_S - time.monotonic()))
    try:
        ended: dict[str, Any] = api.call("DELETE", f"/v1/admin/drills/{drill['id']}")
    except CliError as e:
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
        print(summary(first, last), flush=True)
    if interrupted:
        return 130
    return 1 if failed else 0


def register(sub: Any, conn: argparse.ArgumentParser) -> None:
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
    p.set_defaults(run=run_drill)
