"""The one place real time is read.

Every decision takes ``now`` as an argument; effectful code asks a :class:`Clock`.
Tests and simulations inject :class:`rungar.testing.clock.FakeClock` instead.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


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
