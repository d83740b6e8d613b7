"""The one place real time is read.

Every decision takes ``now`` as an argument; effectful code asks a :class:`Clock`.
Tests and simulations inject :class:`rungar.testing.clock.FakeClock` instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable
from typing import Protocol, TypeVar

T = TypeVar("T")


class Clock(Protocol):
    """Seconds since the epoch, and a way to wait for some of them."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """Wall-clock time for the running daemons."""

    def now(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


async def within(clock: Clock, seconds: float, awaitable: Awaitable[T]) -> T:
    """``awaitable``'s result, or TimeoutError once ``seconds`` have passed on ``clock`` (the
    work is then cancelled). Unlike ``asyncio.wait_for`` it counts on the injected clock, so a
    simulation or a test on virtual time ends the work when the daemon would."""
    work = asyncio.ensure_future(awaitable)
    timer = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait({work, timer}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        work.cancel()
        timer.cancel()
        raise
    if work.done():  # finished, even at the same moment the time ran out: its answer counts
        timer.cancel()
        return work.result()
    work.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await work  # whatever it says on its way out, the time ran out first
    raise TimeoutError
