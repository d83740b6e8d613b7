"""The emulator's time: real, compressed (``factor`` emulated seconds per real second) or stepped.

What GitHub decides by its own clock (session TTLs, assignment timeouts, the rate-limit window)
reads :meth:`EmulatorClock.now`, so a test can jump an hour ahead with :meth:`advance` and a demo
can run a ten-minute job in ten seconds with ``factor=60``. Tokens read :meth:`EmulatorClock.wall`:
clients renew them by their own clock (docs/github-emulator.md, "Wall-clock and emulated times").
Real time comes from the injected :class:`rungar.clock.Clock` (the one module that reads it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from rungar.clock import Clock, SystemClock


class EmulatorClock:
    def __init__(self, factor: float = 1.0, real: Clock | None = None) -> None:
        if factor <= 0:
            raise ValueError("clock factor must be positive")
        self.factor = factor
        self._real = real or SystemClock()
        self._real_start = self._real.now()
        self._offset = 0.0
        self.advanced = asyncio.Event()  # set on every advance, so waiters re-check at once

    def now(self) -> float:
        """Emulated epoch seconds."""
        elapsed = self._real.now() - self._real_start
        return self._real_start + elapsed * self.factor + self._offset

    def wall(self) -> float:
        """Real epoch seconds: what every token's times are written and checked in, the App JWTs
        clients sign and the tokens the emulator issues alike."""
        return self._real.now()

    def wall_of(self, emulated: float) -> float:
        """The wall-clock time an emulated time comes, at the present rate: how a time GitHub
        decides by its clock (a rate-limit reset) is written for a client, which reads it by its
        own."""
        return self.wall() + (emulated - self.now()) / self.factor

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of emulated time (shorter in real time when compressed)."""
        await self._real.sleep(seconds / self.factor)

    def advance(self, seconds: float) -> None:
        self._offset += max(0.0, seconds)
        self.advanced.set()
        self.advanced = asyncio.Event()


class InstantClock:
    """A client-side :class:`Clock` for tests over real HTTP: waits are recorded, barely slept.

    ``now`` is real time so tokens and expiries stay consistent with the emulator; ``sleep``
    records the requested wait (tests assert on backoff and ``Retry-After``) and yields for at
    most ``cap`` real seconds so retry loops neither stall the suite nor spin.
    """

    def __init__(
        self,
        cap: float = 0.02,
        real: Clock | None = None,
        on_sleep: Callable[[float], None] | None = None,
    ) -> None:
        self._real = real or SystemClock()
        self._cap = cap
        self._on_sleep = on_sleep  # e.g. advance the emulator's clock by the same amount
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self._real.now()

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if self._on_sleep is not None:
            self._on_sleep(seconds)
        await self._real.sleep(min(max(0.0, seconds), self._cap))
