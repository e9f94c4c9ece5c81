"""The `sluicegate` command: `serve`, the Rust core's `sim` and `bench` (`native.py`), the admin
commands (a module per resource, one HTTP client in `client.py`), `drill` (`drill_watch.py`),
`status` and `doctor` (`status.py`, `tables.py`) and `completion`; the parser in `parser.py`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from sluicegate.cli import control_plane
from sluicegate.cli.native import NATIVE_COMMANDS


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in NATIVE_COMMANDS:
        handler, _ = NATIVE_COMMANDS[args[0]]
        return handler(args[1:])
    if args == ["--version"]:
        # Answered before the control plane is imported: it tells which build is installed even
        # when that installation is broken.
        from sluicegate.cli.version import version_text

        print(version_text())
        return 0
    try:
        if args[:1] == ["serve"]:
            control_plane.check()
        # Imported here: `sim` and `bench`, started by the hundred in tests and benchmarks, need
        # none of the admin commands (pydantic, the API's models, the control plane).
        from sluicegate.cli.parser import build_parser
    except (control_plane.ForeignControlPlane, ImportError) as e:
        return _refuse(e)
    parser = build_parser()
    parsed = parser.parse_args(args)
    # Every command's parser names what runs it.
    run: Callable[[argparse.Namespace], int] | None = getattr(parsed, "run", None)
    if run is None:
        parser.print_help()
        return 2
    return run(parsed)


def _refuse(error: Exception) -> int:
    """One line on stderr when the control plane is missing or not ours (exit 1); any other
    import failure is a bug and keeps its traceback."""
    if isinstance(error, ImportError):
        try:
            control_plane.check()
        except control_plane.ForeignControlPlane as e:
            error = e
        else:
            raise error
    print(f"sluicegate: {error}", file=sys.stderr)
    return 1


__all__ = ["main"]
