"""`sluicegate sim` and `sluicegate bench`, whose options the Rust core parses (clap): their
arguments are passed through untouched."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Sequence


def wait_for_signal() -> None:
    """Block until SIGINT or SIGTERM; Python owns the signals, the core only obeys stop()."""
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    while not stop.wait(0.5):
        pass


def raise_fd_limit() -> None:
    """Thousands of concurrent streams need as many sockets: lift the soft limit to the hard."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


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
        wait_for_signal()
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


# Command -> (what runs it, its help in `sluicegate --help`).
NATIVE_COMMANDS: dict[str, tuple[Callable[[Sequence[str]], int], str]] = {
    "sim": (cmd_sim, "run a simulated OpenAI/Anthropic model server (see `sluicegate sim --help`)"),
    "bench": (cmd_bench, "run the load generator against a server (see `sluicegate bench --help`)"),
}
