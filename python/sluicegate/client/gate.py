"""The per-process concurrency gate: at most `max_in_flight` calls run, at most `max_waiting` wait
(first come, first served), and a call past both bounds is refused at once.

Threads (the sync clients) and asyncio tasks (the async clients) share one gate, so a process
that mixes them still has one bound. A finished call hands its slot straight to the oldest
waiter, which therefore cannot be overtaken by a newcomer."""

from __future__ import annotations

import asyncio
import threading
from collections import deque


class GateFull(Exception):
    """Raised by `acquire` when every slot is taken and the waiting line is full."""


class _Waiter:
    __slots__ = ("granted",)

    def __init__(self) -> None:
        self.granted = False

    def wake(self) -> bool:
        raise NotImplementedError


class _ThreadWaiter(_Waiter):
    __slots__ = ("event",)

    def __init__(self) -> None:
        super().__init__()
        self.event = threading.Event()

    def wake(self) -> bool:
        self.event.set()
        return True


class _TaskWaiter(_Waiter):
    __slots__ = ("future", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self.loop = loop
        self.future: asyncio.Future[None] = loop.create_future()

    def wake(self) -> bool:
        def resolve() -> None:
            if not self.future.done():
                self.future.set_result(None)

        try:
            self.loop.call_soon_threadsafe(resolve)
        except RuntimeError:  # its loop is closed: nobody is left to take the slot
            return False
        return True


class Gate:
    def __init__(self, max_in_flight: int, max_waiting: int) -> None:
        if not isinstance(max_in_flight, int) or max_in_flight < 1:
            raise ValueError(f"max_in_flight must be a whole number >= 1, got {max_in_flight!r}")
        if not isinstance(max_waiting, int) or max_waiting < 0:
            raise ValueError(f"max_waiting must be a whole number >= 0, got {max_waiting!r}")
        self.max_in_flight = max_in_flight
        self.max_waiting = max_waiting
        self._lock = threading.Lock()
        self._in_flight = 0
        self._waiters: deque[_Waiter] = deque()

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def _enter(self, make: type[_ThreadWaiter] | asyncio.AbstractEventLoop) -> _Waiter | None:
        """A slot now (None), or a place in line; GateFull when the line is full too."""
        with self._lock:
            if self._in_flight < self.max_in_flight and not self._waiters:
                self._in_flight += 1
                return None
            if len(self._waiters) >= self.max_waiting:
                raise GateFull
            waiter: _Waiter = (
                _TaskWaiter(make) if isinstance(make, asyncio.AbstractEventLoop) else make()
            )
            self._waiters.append(waiter)
            return waiter

    def _leave_line(self, waiter: _Waiter) -> bool:
        """Stop waiting; True if the slot was handed over meanwhile (the caller then owns it)."""
        with self._lock:
            if waiter.granted:
                return True
            self._waiters.remove(waiter)
            return False

    def acquire(self, timeout: float) -> bool:
        """A slot within `timeout` seconds (False if none came); GateFull if the line is full."""
        waiter = self._enter(_ThreadWaiter)
        if waiter is None:
            return True
        assert isinstance(waiter, _ThreadWaiter)
        if waiter.event.wait(max(timeout, 0.0)):
            return True
        return self._leave_line(waiter)

    async def acquire_async(self, timeout: float) -> bool:
        waiter = self._enter(asyncio.get_running_loop())
        if waiter is None:
            return True
        assert isinstance(waiter, _TaskWaiter)
        # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation that
        # arrives as the slot is handed over, leaving a cancelled caller holding the slot.
        try:
            async with asyncio.timeout(max(timeout, 0.0)):
                await waiter.future
        except TimeoutError:
            return self._leave_line(waiter)
        except asyncio.CancelledError:
            if self._leave_line(waiter):
                self.release()
            raise
        return True

    def release(self) -> None:
        with self._lock:
            while self._waiters:
                waiter = self._waiters.popleft()
                waiter.granted = True
                if waiter.wake():
                    return
            self._in_flight -= 1
