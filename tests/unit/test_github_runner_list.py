"""One runner listing per installation (docs/github.md, "Runners"): shared by every caller for
``runner_list_max_age``, concurrent callers awaiting one request, a failure kept by no one."""

from __future__ import annotations

import asyncio

import pytest

from rungar.errors import GitHubError
from rungar.github.runner_list import SharedListing
from rungar.testing.clock import FakeClock


class Lister:
    """A listing that answers when told to, counting what it was asked."""

    def __init__(self) -> None:
        self.asked = 0
        self.gate = asyncio.Event()
        self.fail: Exception | None = None

    async def __call__(self) -> list[str]:
        self.asked += 1
        await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        return [f"answer-{self.asked}"]


async def test_concurrent_callers_await_one_request() -> None:
    lister, clock = Lister(), FakeClock()
    shared = SharedListing(lister, clock, 15.0)
    callers = [asyncio.ensure_future(shared.get()) for _ in range(20)]
    await asyncio.sleep(0)
    lister.gate.set()
    answers = await asyncio.gather(*callers)
    assert lister.asked == 1
    assert answers == [["answer-1"]] * 20


async def test_an_answer_is_shared_until_it_is_older_than_the_max_age() -> None:
    lister, clock = Lister(), FakeClock()
    lister.gate.set()
    shared = SharedListing(lister, clock, 15.0)
    assert await shared.get() == ["answer-1"]
    clock.advance(14.9)
    assert await shared.get() == ["answer-1"]
    clock.advance(0.1)
    assert await shared.get() == ["answer-2"], "15 s old: asked again"
    assert lister.asked == 2


async def test_a_failed_request_reaches_every_waiting_caller_and_is_not_kept() -> None:
    lister, clock = Lister(), FakeClock()
    lister.fail = GitHubError("502 from GitHub", 502)
    shared = SharedListing(lister, clock, 15.0)
    callers = [asyncio.ensure_future(shared.get()) for _ in range(3)]
    await asyncio.sleep(0)
    lister.gate.set()
    results = await asyncio.gather(*callers, return_exceptions=True)
    assert all(isinstance(r, GitHubError) for r in results) and lister.asked == 1
    lister.fail = None
    assert await shared.get() == ["answer-2"], "the next caller asks again at once"


async def test_a_cancelled_caller_does_not_cancel_the_request_for_the_others() -> None:
    lister, clock = Lister(), FakeClock()
    shared = SharedListing(lister, clock, 15.0)
    first = asyncio.ensure_future(shared.get())
    second = asyncio.ensure_future(shared.get())
    await asyncio.sleep(0)
    first.cancel()
    lister.gate.set()
    assert await second == ["answer-1"]
    with pytest.raises(asyncio.CancelledError):
        await first
    assert lister.asked == 1


async def test_a_max_age_of_zero_shares_only_the_request_in_flight() -> None:
    lister, clock = Lister(), FakeClock()
    lister.gate.set()
    shared = SharedListing(lister, clock, 0.0)
    await shared.get()
    await shared.get()
    assert lister.asked == 2
