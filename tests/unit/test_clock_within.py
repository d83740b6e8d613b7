"""``within``: work bounded on the injected clock, which only a clock's time ends."""

from __future__ import annotations

import asyncio

import pytest

from rungar.clock import within
from rungar.testing.clock import FakeClock


async def test_work_that_answers_in_time_gives_its_answer_and_leaves_no_timer() -> None:
    clock = FakeClock()

    async def answer() -> str:
        await clock.sleep(5)
        return "created"

    task = asyncio.ensure_future(within(clock, 10, answer()))
    await clock.run_for(5)
    assert await task == "created"
    assert clock.next_wakeup() is None, "the timer went with the answer"


async def test_work_past_its_time_is_cancelled_once_and_ends_in_timeout() -> None:
    clock = FakeClock()
    cancelled: list[bool] = []

    async def never() -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "unreachable"

    task = asyncio.ensure_future(within(clock, 10, never()))
    await clock.run_for(9.9)
    assert not task.done() and cancelled == [], "loop time passing does not end it; 9.9 s left"
    await clock.run_for(0.1)
    with pytest.raises(TimeoutError):
        await task
    assert cancelled == [True]


async def test_an_answer_given_as_the_time_runs_out_counts() -> None:
    clock = FakeClock()

    async def answer_at_ten() -> str:
        await clock.sleep(10)
        return "created"

    task = asyncio.ensure_future(within(clock, 10, answer_at_ten()))
    await clock.run_for(10)
    assert await task == "created"


async def test_cancelling_the_caller_cancels_the_work() -> None:
    clock = FakeClock()
    started = asyncio.Event()
    cancelled: list[bool] = []

    async def never() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    task = asyncio.ensure_future(within(clock, 10, never()))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0)
    assert cancelled == [True]
