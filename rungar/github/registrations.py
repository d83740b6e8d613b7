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
import heapq
import itertools
from collections import deque
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
        rp.trailing(self.queue.accepted, self.at, self.queue.window)
        self.answered()

    def sent(self) -> None:
        """The call went out (whatever came back): the turn was used."""
        self.used = True

    def answered(self) -> None:
        """The call is no longer in the air (answered, failed, or never sent)."""
        if self.in_flight:
            self.in_flight = False
            self.queue.landed()

    def give_back(self) -> None:
        """The turn granted after a 429 is not used (the runner is no longer wanted): its moment
        goes to the next waiting registration."""
        self.answered()
        self.queue.give_back(self.at)

    async def throttled(self, retry_after: float) -> None:
        """GitHub answered 429: learn the pace, then wait for another turn."""
        self.used = True
        q = self.queue
        before = q.pace.per_minute
        now = q.clock.now()
        took = rp.taken(q.accepted, now, q.window)
        q.pace = rp.throttled(q.pace, now, retry_after, q.margin, took, q.window)
        self.answered()  # after the pace is learned: the turn it frees keeps to it
        if q.pace.per_minute != before:
            log.info(
                "github.registration_pace",
                per_minute=round(q.pace.per_minute, 1),
                retry_after_s=round(retry_after, 1),
            )
        await q.wait(self)


class RegistrationQueue:
    """Carries out :func:`rp.next_grant` whenever it may say something new: a registration
    comes, one in the air is answered, or the moment the pace named comes (a timer on the
    injected clock). The waiting keys are a heap (cancelled ones are dropped when they reach
    its top); a turn free at once is granted without a future or a task switch."""

    def __init__(
        self,
        clock: Clock,
        *,
        per_minute: float = 0.0,
        margin: float = 0.02,
        forget_after: float = 3600.0,
        relax_every: float = 60.0,
        most_in_flight: int = 4,
        in_flight_share: float = 0.02,
        window: float = rp.WINDOW,
    ) -> None:
        self.window = window  # the span GitHub states its limit over
        self.clock = clock
        self.most_in_flight = most_in_flight
        self.in_flight_share = in_flight_share
        self.in_flight = 0
        self.margin = margin
        self.forget_after = forget_after
        self.relax_every = relax_every
        self.pace = rp.start(per_minute)
        self.accepted: deque[float] = deque()  # times GitHub took, the trailing minute's
        self._waiting: dict[rp.RegistrationKey, Ticket] = {}
        self._heap: list[rp.RegistrationKey] = []
        self._seq = itertools.count()
        self._timer: asyncio.Task[None] | None = None
        self._timer_at = 0.0

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
                self._dispatch()

    def give_back(self, at: float) -> None:
        """A moment granted at ``at`` and not used goes to the next waiting registration."""
        self.pace = rp.returned(self.pace, at)
        self._dispatch()

    def landed(self) -> None:
        self.in_flight -= 1
        if self._waiting:
            self._dispatch()

    def _decide(self, first: rp.RegistrationKey | None, now: float) -> rp.Grant | None:
        self.pace = rp.forgotten(
            rp.relaxed(self.pace, now, self.relax_every), now, self.forget_after
        )
        rp.forget(self.accepted, now, self.window)
        bound = rp.in_flight_bound(self.most_in_flight, self.in_flight_share, len(self.accepted))
        return rp.next_grant(first, self.pace, now, in_flight=self.in_flight, most_in_flight=bound)

    def _grant(self, ticket: Ticket, now: float) -> None:
        self.pace = rp.granted(self.pace, now)
        ticket.at = now
        ticket.in_flight = True
        self.in_flight += 1

    async def wait(self, ticket: Ticket) -> None:
        if not self._waiting:
            now = self.clock.now()
            grant = self._decide(ticket.key, now)
            if grant is not None and grant.at <= now:
                self._grant(ticket, now)  # nothing ahead of it and the pace lets it go
                return
        loop = asyncio.get_running_loop()
        granted = ticket.granted = loop.create_future()
        self._waiting[ticket.key] = ticket
        heapq.heappush(self._heap, ticket.key)
        self._dispatch()
        try:
            await asyncio.shield(granted)
        except asyncio.CancelledError:
            if self._waiting.pop(ticket.key, None) is None and granted.done():
                # Granted as it was cancelled: the moment goes back to the others.
                self.pace = rp.returned(self.pace, ticket.at)
                ticket.answered()
                self._dispatch()
            raise

    def _first(self) -> rp.RegistrationKey | None:
        heap, waiting = self._heap, self._waiting
        while heap and heap[0] not in waiting:
            heapq.heappop(heap)  # cancelled while it waited
        return heap[0] if heap else None

    def _dispatch(self) -> None:
        """Grant every turn the decision lets go now; wake up for the next moment it names."""
        while self._waiting:
            now = self.clock.now()
            grant = self._decide(self._first(), now)
            if grant is None:
                return  # every turn is in the air: the next answer frees one
            if grant.at > now:
                self.pace = rp.binding(self.pace, grant.at)  # the pace holds one back
                self._wake_at(grant.at)
                return
            heapq.heappop(self._heap)
            ticket = self._waiting.pop(grant.key)
            self._grant(ticket, now)
            if ticket.granted is not None and not ticket.granted.done():
                ticket.granted.set_result(now)

    def _wake_at(self, at: float) -> None:
        if self._timer is not None and not self._timer.done():
            if self._timer_at <= at:
                return  # it wakes in time and decides again
            self._timer.cancel()
        self._timer_at = at
        self._timer = asyncio.create_task(self._sleep_until(at), name="registration-pace")

    async def _sleep_until(self, at: float) -> None:
        await self.clock.sleep(at - self.clock.now())
        self._timer = None  # the decision may name a later moment: a timer of its own
        self._dispatch()

    def view(self) -> PaceView:
        now = self.clock.now()
        pace = self.pace = rp.forgotten(
            rp.relaxed(self.pace, now, self.relax_every), now, self.forget_after
        )
        source = "github" if pace.learned else ("configured" if pace.configured > 0 else "")
        return PaceView(
            per_minute=pace.per_minute,
            waiting=len(self._waiting),
            source=source,
            throttled=pace.throttled,
        )

    async def aclose(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._timer
