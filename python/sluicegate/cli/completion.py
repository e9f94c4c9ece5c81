"""`sluicegate completion bash|zsh|tcsh`: a shell completion script generated from the parser
(shtab), so it always knows the commands and options of this version.

    sluicegate completion bash > /etc/bash_completion.d/sluicegate
    sluicegate completion zsh > "${fpath[1]}/_sluicegate"
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

SHELLS = ("bash", "zsh", "tcsh")


def register(sub: Any, build_parser: Callable[[], Any]) -> None:
    p = sub.add_parser(
        "completion",
        help="print a shell completion script (bash, zsh or tcsh)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("shell", choices=SHELLS)
    p.set_defaults(run=lambda args: _print_script(build_parser(), args.shell))


def _print_script(parser: argparse.ArgumentParser, shell: str) -> int:
    import shtab

    print(shtab.complete(parser, shell=shell), end="")
    return 0
