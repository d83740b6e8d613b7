"""The installation's registration queue: every JIT-config call waits here for its turn
(docs/github.md, "Registration pace").

The decision (which waiting registration goes next, at what moment, and what a 429 teaches) is
:mod:`rungar.scaling.registration_pace`; this carries it out on the injected clock. One queue
per installation, shared by every scale set, so their registrations together keep to GitHub's
limit. A caller holds a :class:`Ticket` for its turn: it reports what GitHub answered
(:meth:`Ticket.accepted`, :meth:`Ticket.throttled`) and, throttled, waits for another turn at
the head of its priority class (its key is kept). A turn never used (the runner was no longer
wanted) gives its moment back.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass

import structlog

from rungar.clock import Clock
from rungar.scaling import registration_pace as rp

log = structlog.get_logger("rungar.github")


@dataclass(frozen=True, slots=True)
class PaceView:
    """What ``rungar status`` and the metrics show of the queue."""

    per_minute: float  # 0: registrations go at once
    waiting: int
    source: str  # "github" (learned from a 429), "configured", or "" (no pace)
    throttled: int
    next_in: float  # seconds until the next registration may go

    def sentence(self) -> str:
        """``registering 40/min, GitHub's limit; 312 waiting``, or "" with nothing to say."""
        if self.per_minute <= 0:
            return f"registering at once; {self.waiting} waiting" if self.waiting else ""
        why = "GitHub's limit" if self.source == "github" else "the configured pace"
        return f"registering {self.per_minute:.0f}/min, {why}; {self.waiting} waiting"


@dataclass(slots=True)
class Ticket:
    queue: RegistrationQueue
    key: rp.RegistrationKey
    at: float = 0.0
    used: bool = False
    in_flight: bool = False
    granted: asyncio.Future[float] | None = None

    def accepted(self) -> None:
        """GitHub took the registration."""
        self.used = True
        self.queue.pace = rp.accepted(self.queue.pace, self.at)
        self.answered()

    def sent(self) -> None:
        """The call went out (whatever came back): the turn was used."""
        self.used = True

    def answered(self) -> None:
        """The call is no longer in the air (answered, failed, or never sent)."""
        if self.in_flight:
            self.in_flight = False
            self.queue.landed()

    async def throttled(self, retry_after: float) -> None:
        """GitHub answered 429: learn the pace, then wait for another turn."""
        self.used = True
        self.answered()
        q = self.queue
        before = q.pace.per_minute
        q.pace = rp.throttled(q.pace, q.clock.now(), retry_after, q.margin)
        if q.pace.per_minute != before:
            log.info(
                "github.registration_pace",
                per_minute=round(q.pace.per_minute, 1),
                retry_after_s=round(retry_after, 1),
            )
        await q.wait(self)


class RegistrationQueue:
    def __init__(
        self,
        clock: Clock,
        *,
        per_minute: float = 0.0,
        margin: float = 0.02,
        forget_after: float = 3600.0,
        most_in_flight: int = 4,
    ) -> None:
        self.clock = clock
        self.most_in_flight = most_in_flight
        self.in_flight = 0
        self._landed = asyncio.Event()
        self.margin = margin
        self.forget_after = forget_after
        self.pace = rp.start(per_minute)
        self._waiting: dict[rp.RegistrationKey, Ticket] = {}
        self._seq = itertools.count()
        self._driver: asyncio.Task[None] | None = None

    def key(self, *, refill: bool, priority: int) -> rp.RegistrationKey:
        return rp.RegistrationKey.of(refill=refill, priority=priority, seq=next(self._seq))

    @contextlib.asynccontextmanager
    async def turn(self, *, refill: bool, priority: int) -> AsyncIterator[Ticket]:
        """Wait for this registration's turn; the ticket reports GitHub's answer."""
        ticket = Ticket(self, self.key(refill=refill, priority=priority))
        await self.wait(ticket)
        try:
            yield ticket
        finally:
            ticket.answered()
            if not ticket.used:
                self.pace = rp.returned(self.pace, ticket.at)

    def landed(self) -> None:
        self.in_flight -= 1
        self._landed.set()

    async def wait(self, ticket: Ticket) -> None:
        loop = asyncio.get_running_loop()
        granted = ticket.granted = loop.create_future()
        self._waiting[ticket.key] = ticket
        if self._driver is None or self._driver.done():
            self._driver = asyncio.create_task(self._drive(), name="registration-pace")
        try:
            ticket.at = await asyncio.shield(granted)
        except asyncio.CancelledError:
            if self._waiting.pop(ticket.key, None) is None and granted.done():
                # Granted as it was cancelled: the moment goes back to the others.
                self.pace = rp.returned(self.pace, granted.result())
                ticket.answered()
            raise

    async def _drive(self) -> None:
        while self._waiting:
            now = self.clock.now()
            self.pace = rp.forgotten(self.pace, now, self.forget_after)
            grant = rp.next_grant(
                self._waiting,
                self.pace,
                now,
                in_flight=self.in_flight,
                most_in_flight=self.most_in_flight,
            )
            if grant is None:
                # Every turn is in the air: the next answer frees one.
                self._landed.clear()
                await self._landed.wait()
                continue
            if grant.at > now:
                await self.clock.sleep(grant.at - now)
                continue  # a better registration may have come, or a 429 moved the pace
            ticket = self._waiting.pop(grant.key)
            self.pace = rp.granted(self.pace, now)
            ticket.in_flight = True
            self.in_flight += 1
            if ticket.granted is not None and not ticket.granted.done():
                ticket.granted.set_result(now)
            await asyncio.sleep(0)  # let the granted caller send before the next is decided

    def view(self) -> PaceView:
        pace = self.pace
        source = "github" if pace.learned else ("configured" if pace.configured > 0 else "")
        return PaceView(
            per_minute=pace.per_minute,
            waiting=len(self._waiting),
            source=source,
            throttled=pace.throttled,
            next_in=max(0.0, pace.next_at - self.clock.now()),
        )

    async def aclose(self) -> None:
        if self._driver is not None:
            self._driver.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._driver
