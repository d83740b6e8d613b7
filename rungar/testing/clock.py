"""A hand-wound clock for tests and simulations: time moves only when told to.

``sleep`` parks the caller until :meth:`FakeClock.advance` moves time past its wake-up, so
async code that waits on the clock runs on virtual time with no real sleeping.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools


class FakeClock:
    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._ids = itertools.count()

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._ids), future))
        await future

    def next_wakeup(self) -> float | None:
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)
        return self._sleepers[0][0] if self._sleepers else None

    def set(self, when: float) -> None:
        """Move time to ``when`` (never backwards) and wake every sleeper due by then."""
        self._now = max(self._now, when)
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)

    def advance(self, seconds: float) -> None:
        self.set(self._now + seconds)

    async def run_for(self, seconds: float, step: float = 0.0) -> None:
        """Advance ``seconds`` of virtual time, letting woken tasks run at each wake-up."""
        end = self._now + seconds
        while True:
            for _ in range(20):
                await asyncio.sleep(0)
            wake = self.next_wakeup()
            if wake is None or wake > end:
                break
            self.set(wake if step <= 0 else min(wake, self._now + step))
        self.set(end)
        for _ in range(20):
            await asyncio.sleep(0)


class JumpingClock:
    """Time that jumps forward by every sleep, at once: retry delays and backoffs cost nothing,
    and ``slept`` tells a test which waits were asked for."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.t = start
        self.slept: list[float] = []

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.t += seconds
        await asyncio.sleep(0)  # still a point where other tasks run, as a real sleep is
