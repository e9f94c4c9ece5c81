"""The `sluicegate` command line."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from sluicegate import __version__
from sluicegate.admin_cli import ADMIN_COMMANDS, add_admin_commands, run_admin, run_drill
from sluicegate.status_cli import STATUS_COMMANDS, add_status_commands, run_status


def _wait_for_signal() -> None:
    """Block until SIGINT or SIGTERM; Python owns the signals, the core only obeys stop()."""
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    while not stop.wait(0.5):
        pass


def _usage_exit(error: BaseException) -> int:
    message, code = error.args
    stream = sys.stdout if code == 0 else sys.stderr
    print(message, file=stream, end="" if str(message).endswith("\n") else "\n")
    return int(code)


def cmd_sim(args: Sequence[str]) -> int:
    from sluicegate._core import Simulator, StartError, UsageError

    raise_fd_limit()
    try:
        sim = Simulator(list(args))
    except UsageError as e:
        return _usage_exit(e)
    except StartError as e:
        print(f"sluicegate sim: {e}", file=sys.stderr)
        return 1
    print(f"sluicegate sim listening on http://{sim.address}", flush=True)
    try:
        _wait_for_signal()
    finally:
        sim.stop()
    return 0


def cmd_bench(args: Sequence[str]) -> int:
    from sluicegate._core import UsageError, run_bench

    raise_fd_limit()
    try:
        _report, table = run_bench(list(args))
    except UsageError as e:
        return _usage_exit(e)
    except KeyboardInterrupt:
        print("sluicegate bench: interrupted", file=sys.stderr)
        return 130
    print(table, end="")
    return 0


def raise_fd_limit() -> None:
    """Thousands of concurrent streams need as many sockets: lift the soft limit to the hard."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


# Commands whose options are parsed by the Rust core (clap), passed through untouched.
RUST_COMMANDS: dict[str, tuple[Callable[[Sequence[str]], int], str]] = {
    "sim": (cmd_sim, "run a simulated OpenAI/Anthropic model server (see `sluicegate sim --help`)"),
    "bench": (cmd_bench, "run the load generator against a server (see `sluicegate bench --help`)"),
}


def cmd_serve(args: argparse.Namespace) -> int:
    from control.serve import run

    return run(args.config)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sluicegate",
        description="A multi-tenant LLM API gateway: one key and one base URL in front of many "
        "model servers, with bounded queues, retries, fallback and honest latency figures.",
    )
    parser.add_argument("--version", action="version", version=f"sluicegate {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_text) in RUST_COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    serve = sub.add_parser("serve", help="run the gateway: data plane and admin API in one process")
    serve.add_argument(
        "--config",
        type=Path,
        help="TOML or YAML settings (see control/sluicegate.example.toml); "
        "SLUICEGATE_* environment variables override it",
    )
    add_admin_commands(sub)
    add_status_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in RUST_COMMANDS:
        handler, _ = RUST_COMMANDS[args[0]]
        return handler(args[1:])
    parser = build_parser()
    parsed = parser.parse_args(args)
    if parsed.command is None:
        parser.print_help()
        return 2
    if parsed.command == "serve":
        return cmd_serve(parsed)
    if parsed.command in ADMIN_COMMANDS:
        return run_admin(parsed)
    if parsed.command == "drill":
        return run_drill(parsed)
    if parsed.command in STATUS_COMMANDS:
        return run_status(parsed)
    return 0
