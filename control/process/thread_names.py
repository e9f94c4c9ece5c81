"""The control plane's threads under their own names in the operating system (`top -H`,
`/proc/PID/task/*/comm`, `perf`), as the core's are: without it every Python thread shows as
`python`, and what each job costs the proxy's CPU cannot be told apart without a profiler
(`bench/threads.py` groups a process's threads by these names)."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys
import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

_PR_SET_NAME = 15


@functools.cache
def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        prctl: Callable[..., int] = libc.prctl
        return prctl
    except (OSError, AttributeError):
        return None


def name_this_thread(name: str) -> None:
    """Give the calling thread `name` in the operating system (the kernel keeps its first 15
    bytes); nothing where that cannot be done. Only the name changes: never a failure."""
    prctl = _prctl()
    if prctl is not None:
        prctl(_PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)


def named(target: Callable[P, R]) -> Callable[P, R]:
    """`target`, naming the thread it runs in after the `threading.Thread`'s own name first."""

    @functools.wraps(target)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        name_this_thread(threading.current_thread().name)
        return target(*args, **kwargs)

    return run
