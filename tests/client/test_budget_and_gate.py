"""The retry budget (on a fake clock) and the concurrency gate (threads and asyncio tasks)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest
from sluicegate.client.budget import RetryBudget
from sluicegate.client.gate import Gate, GateFull


def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 5
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.001)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_retries_are_a_ratio_of_calls_plus_a_floor() -> None:
    clock = FakeClock()
    budget = RetryBudget(ratio=0.1, min_per_second=0.5, window=10, clock=clock)
    for _ in range(100):
        budget.record_call()
    granted = sum(budget.try_spend() for _ in range(40))
    assert granted == 15  # 0.1 x 100 calls + 0.5/s x 10 s
    assert budget.exhausted == 25
    assert budget.snapshot()["retries"] == 15


def test_old_calls_stop_paying_for_retries_after_the_window() -> None:
    clock = FakeClock()
    budget = RetryBudget(ratio=0.2, min_per_second=0.0, window=10, clock=clock)
    for _ in range(50):
        budget.record_call()
    assert sum(budget.try_spend() for _ in range(20)) == 10
    clock.now += 5
    assert not budget.try_spend()  # the same window still
    clock.now += 6  # the calls and retries of the first second are gone
    assert not budget.try_spend()  # no calls in the window: nothing to spend
    for _ in range(10):
        budget.record_call()
    assert sum(budget.try_spend() for _ in range(5)) == 2


def test_no_window_ever_holds_more_retries_than_its_calls_allow() -> None:
    clock = FakeClock()
    clock.now = 1000.5
    budget = RetryBudget(ratio=0.1, min_per_second=0.0, window=10, clock=clock)
    for _ in range(100):
        budget.record_call()
    assert sum(budget.try_spend() for _ in range(30)) == 10
    clock.now = 1009.9
    for _ in range(100):
        budget.record_call()
    assert sum(budget.try_spend() for _ in range(30)) == 10  # 20 in the window, for 200 calls
    # The first second's calls leave the window; its retries, made at 1000.5, are still in it.
    clock.now = 1010.2
    assert not budget.try_spend()
    clock.now = 1010.6  # now they left too: 10 retries for the 100 calls of the window
    assert not budget.try_spend()
    budget.record_call()
    budget.record_call()  # 102 calls...
    assert not budget.try_spend()
    for _ in range(8):
        budget.record_call()
    assert budget.try_spend()  # ...110 calls: an 11th retry


def test_the_floor_allows_retries_without_traffic() -> None:
    budget = RetryBudget(ratio=0.0, min_per_second=0.3, window=10, clock=FakeClock())
    assert sum(budget.try_spend() for _ in range(10)) == 3


def test_budget_refuses_nonsense() -> None:
    for ratio, floor, window in ((1.5, 0, 10), (-0.1, 0, 10), (0.1, -1, 10), (0.1, 0, 0.5)):
        with pytest.raises(ValueError):
            RetryBudget(ratio, floor, window)


def test_gate_bounds_in_flight_and_waiting_first_come_first_served() -> None:
    gate = Gate(max_in_flight=2, max_waiting=2)
    assert gate.acquire(0) and gate.acquire(0)
    order: list[str] = []
    started = [threading.Event(), threading.Event()]

    def wait(name: str, i: int) -> None:
        started[i].set()
        assert gate.acquire(30)
        order.append(name)

    first = threading.Thread(target=wait, args=("first", 0))
    first.start()
    started[0].wait()
    wait_until(lambda: gate.waiting == 1)
    second = threading.Thread(target=wait, args=("second", 1))
    second.start()
    wait_until(lambda: gate.waiting == 2)
    with pytest.raises(GateFull):
        gate.acquire(30)  # two running, two waiting: refused at once
    gate.release()
    first.join(5)
    assert order == ["first"] and gate.in_flight == 2
    gate.release()
    second.join(5)
    assert order == ["first", "second"] and gate.waiting == 0
    gate.release()
    gate.release()
    assert gate.in_flight == 0


def test_a_waiter_whose_time_runs_out_leaves_the_line() -> None:
    gate = Gate(max_in_flight=1, max_waiting=1)
    assert gate.acquire(0)
    assert not gate.acquire(0)
    assert gate.waiting == 0
    gate.release()
    assert gate.in_flight == 0


def test_tasks_and_threads_share_one_gate() -> None:
    gate = Gate(max_in_flight=1, max_waiting=3)

    async def scenario() -> None:
        assert await gate.acquire_async(0)
        waiter = asyncio.create_task(gate.acquire_async(30))
        await asyncio.sleep(0)
        assert gate.waiting == 1
        cancelled = asyncio.create_task(gate.acquire_async(30))
        await asyncio.sleep(0)
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        assert gate.waiting == 1
        # A thread releases the slot: the task waiting on the loop gets it.
        threading.Thread(target=gate.release).start()
        assert await asyncio.wait_for(waiter, 5)
        assert gate.in_flight == 1
        assert not await gate.acquire_async(0)
        gate.release()

    asyncio.run(scenario())
    assert gate.in_flight == 0 and gate.waiting == 0


def test_a_slot_handed_to_a_cancelled_task_is_passed_on() -> None:
    gate = Gate(max_in_flight=1, max_waiting=2)

    async def scenario() -> None:
        assert await gate.acquire_async(0)
        doomed = asyncio.create_task(gate.acquire_async(30))
        await asyncio.sleep(0)
        heir = asyncio.create_task(gate.acquire_async(30))
        await asyncio.sleep(0)
        gate.release()  # the slot goes to `doomed`, which is cancelled before it runs
        doomed.cancel()
        with pytest.raises(asyncio.CancelledError):
            await doomed
        assert await asyncio.wait_for(heir, 5)
        gate.release()

    asyncio.run(scenario())
    assert gate.in_flight == 0
