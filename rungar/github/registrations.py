"""The installation's registration queue: every JIT-config call waits here for its turn
(docs/github.md, "Registration pace").

The decision (which waiting registration goes next, at what moment, and what a 429 teaches) is
:mod:`rungar.scaling.registration_pace`; this carries it out on the injected clock. One queue
per installation, shared by every scale set, so their registrations together keep to GitHub's
limit. A caller holds a :class:`Ticket` for its turn: it reports what GitHub answered
(:meth:`Ticket.accepted`, :meth:`Ticket.throttled`) and, throttled, waits for another turn at
the head of its priority class (its key is kept). A turn never used (the runner was no longer
wanted) gives its moment back.

With several GitHub Apps (``github.apps``) the queue keeps one lane per App, each with a pace of
its own, and still one priority order: each turn goes to the App
:func:`rungar.scaling.registration_spread.spread` names, and the ticket says which
(:attr:`Ticket.app`). An App GitHub refuses is skipped (:meth:`Ticket.refused`) and the
registration waits for another App's turn, at the head of its priority class.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

import structlog

from rungar.clock import Clock
from rungar.scaling import registration_pace as rp
from rungar.scaling import registration_spread as rs

log = structlog.get_logger("rungar.github")


@dataclass(frozen=True, slots=True)
class PaceView:
    """What ``rungar status`` and the metrics show of the queue (all Apps together)."""

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


@dataclass(frozen=True, slots=True)
class AppView:
    """One App's lane, for ``rungar status``: its pace, what GitHub took from it in the
    trailing minute, and since when it fails (0: it does not) with GitHub's answer."""

    app: str
    per_minute: float
    source: str
    throttled: int
    taken: int
    failing_since: float = 0.0
    error: str = ""
    window: float = rp.WINDOW  # what ``taken`` counts over

    def sentence(self) -> str:
        """``170/min, GitHub's limit; 168 in the trailing minute``, or ``failing, skipped:
        GitHub's refusal``."""
        if self.failing_since > 0:
            return f"failing, skipped: {self.error}"
        if self.per_minute <= 0:
            pace = "at once"
        else:
            why = "GitHub's limit" if self.source == "github" else "the configured pace"
            pace = f"{self.per_minute:.0f}/min, {why}"
        span = "minute" if self.window == rp.WINDOW else f"{self.window:g} s"
        return f"{pace}; {self.taken} in the trailing {span}"


@dataclass(slots=True)
class Lane:
    """One App's share of the queue: its pace, the times GitHub took its registrations in the
    trailing minute, its calls in the air, and whether GitHub refuses it."""

    app: str
    pace: rp.Pace
    accepted: deque[float] = field(default_factory=deque)
    in_flight: int = 0
    failing_since: float = 0.0
    error: str = ""


@dataclass(slots=True)
class Ticket:
    queue: RegistrationQueue
    key: rp.RegistrationKey
    at: float = 0.0
    used: bool = False
    in_flight: bool = False
    granted: asyncio.Future[float] | None = None
    lane: int = 0  # the App this turn is the App's of (its index in github.apps)

    @property
    def app(self) -> int:
        """Which App registers on this turn: its index in ``github.apps`` (0 with one)."""
        return self.lane

    @property
    def _lane(self) -> Lane:
        return self.queue.lanes[self.lane]

    def accepted(self) -> str:
        """GitHub took the registration. The App's name when it had been failing (it works
        again), else ""."""
        self.used = True
        lane = self._lane
        rp.trailing(lane.accepted, self.at, self.queue.window)
        self.answered()
        if lane.failing_since:
            lane.failing_since, lane.error = 0.0, ""
            log.info("github.app_working", app=lane.app)
            return lane.app
        return ""

    def sent(self) -> None:
        """The call went out (whatever came back): the turn was used."""
        self.used = True

    def answered(self) -> None:
        """The call is no longer in the air (answered, failed, or never sent)."""
        if self.in_flight:
            self.in_flight = False
            self.queue.landed(self.lane)

    def give_back(self) -> None:
        """The turn granted after a 429 is not used (the runner is no longer wanted): its moment
        goes to the next waiting registration."""
        self.answered()
        self.queue.give_back(self.at, self.lane)

    async def throttled(self, retry_after: float) -> None:
        """GitHub answered 429: learn the App's pace, then wait for another turn."""
        self.used = True
        q = self.queue
        lane = self._lane
        before = lane.pace.per_minute
        now = q.clock.now()
        took = rp.taken(lane.accepted, now, q.window)
        lane.pace = rp.throttled(lane.pace, now, retry_after, q.margin, took, q.window)
        self.answered()  # after the pace is learned: the turn it frees keeps to it
        if lane.pace.per_minute != before:
            log.info(
                "github.registration_pace",
                per_minute=round(lane.pace.per_minute, 1),
                retry_after_s=round(retry_after, 1),
                **({"app": lane.app} if len(q.lanes) > 1 else {}),
            )
        await q.wait(self)

    def refused(self, error: str) -> bool:
        """GitHub refused this turn's App (revoked, suspended: 401 or 403): it is skipped from
        now on. True when it was not failing before (the caller says so once)."""
        self.used = True
        lane = self._lane
        newly = not lane.failing_since
        lane.failing_since = self.queue.clock.now()
        lane.error = error
        self.answered()
        return newly

    def elsewhere(self) -> bool:
        """Whether another App than this turn's may take the registration now."""
        q = self.queue
        others = [i for i, lane in enumerate(q.lanes) if i != self.lane and not lane.failing_since]
        return bool(others)

    async def again(self) -> None:
        """Wait for another turn (another App's, this one refused), ahead of later keys."""
        await self.queue.wait(self)


class RegistrationQueue:
    """Carries out :func:`rs.spread` whenever it may say something new: a registration
    comes, one in the air is answered, or the moment a pace named comes (a timer on the
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
        apps: Sequence[str] = ("",),
        app_retry_after: float = 600.0,
    ) -> None:
        self.window = window  # the span GitHub states its limit over
        self.clock = clock
        self.most_in_flight = most_in_flight
        self.in_flight_share = in_flight_share
        self.margin = margin
        self.forget_after = forget_after
        self.relax_every = relax_every
        self.app_retry_after = app_retry_after
        self.lanes = [Lane(app, rp.start(per_minute)) for app in (apps or ("",))]
        self._waiting: dict[rp.RegistrationKey, Ticket] = {}
        self._heap: list[rp.RegistrationKey] = []
        self._seq = itertools.count()
        self._timer: asyncio.Task[None] | None = None
        self._timer_at = 0.0

    # The first App's lane, under the names one App's queue has always had.
    @property
    def pace(self) -> rp.Pace:
        return self.lanes[0].pace

    @pace.setter
    def pace(self, pace: rp.Pace) -> None:
        self.lanes[0].pace = pace

    @property
    def accepted(self) -> deque[float]:
        return self.lanes[0].accepted

    @property
    def in_flight(self) -> int:
        return sum(lane.in_flight for lane in self.lanes)

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
                lane = self.lanes[ticket.lane]
                lane.pace = rp.returned(lane.pace, ticket.at)
                self._dispatch()

    def give_back(self, at: float, lane: int = 0) -> None:
        """A moment granted at ``at`` and not used goes to the next waiting registration."""
        self.lanes[lane].pace = rp.returned(self.lanes[lane].pace, at)
        self._dispatch()

    def landed(self, lane: int = 0) -> None:
        self.lanes[lane].in_flight -= 1
        if self._waiting:
            self._dispatch()

    def _fresh(self, lane: Lane, now: float) -> rp.Pace:
        lane.pace = rp.forgotten(
            rp.relaxed(lane.pace, now, self.relax_every), now, self.forget_after
        )
        return lane.pace

    def _decide(self, first: rp.RegistrationKey | None, now: float) -> rs.LaneGrant | None:
        lanes = []
        for lane in self.lanes:
            pace = self._fresh(lane, now)
            rp.forget(lane.accepted, now, self.window)
            took = len(lane.accepted)
            bound = rp.in_flight_bound(self.most_in_flight, self.in_flight_share, took)
            lanes.append(rs.AppLane(pace, lane.in_flight, bound, took, lane.failing_since))
        return rs.spread(first, lanes, now, retry_after=self.app_retry_after)

    def _grant(self, ticket: Ticket, lane: int, now: float) -> None:
        chosen = self.lanes[lane]
        chosen.pace = rp.granted(chosen.pace, now)
        ticket.at = now
        ticket.lane = lane
        ticket.in_flight = True
        chosen.in_flight += 1

    async def wait(self, ticket: Ticket) -> None:
        if not self._waiting:
            now = self.clock.now()
            grant = self._decide(ticket.key, now)
            if grant is not None and grant.at <= now:
                self._grant(ticket, grant.lane, now)  # nothing ahead of it and a pace lets it go
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
                lane = self.lanes[ticket.lane]
                lane.pace = rp.returned(lane.pace, ticket.at)
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
                lane = self.lanes[grant.lane]
                lane.pace = rp.binding(lane.pace, grant.at)  # the pace holds one back
                self._wake_at(grant.at)
                return
            heapq.heappop(self._heap)
            ticket = self._waiting.pop(grant.key)
            self._grant(ticket, grant.lane, now)
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

    @staticmethod
    def _source(pace: rp.Pace) -> str:
        return "github" if pace.learned else ("configured" if pace.configured > 0 else "")

    def view(self) -> PaceView:
        """The Apps together: their paces added (0 when any sends at once, or all fail)."""
        now = self.clock.now()
        working = [lane for lane in self.lanes if not lane.failing_since] or self.lanes
        paces = [self._fresh(lane, now) for lane in working]
        unpaced = any(p.per_minute <= 0 for p in paces)
        learned = any(p.learned for p in paces)
        return PaceView(
            per_minute=0.0 if unpaced else sum(p.per_minute for p in paces),
            waiting=len(self._waiting),
            source="github" if learned else self._source(paces[0]),
            throttled=sum(self._fresh(lane, now).throttled for lane in self.lanes),
        )

    def apps(self) -> list[AppView]:
        """Each App's lane, in ``github.apps`` order."""
        now = self.clock.now()
        views = []
        for lane in self.lanes:
            pace = self._fresh(lane, now)
            views.append(
                AppView(
                    app=lane.app,
                    per_minute=pace.per_minute,
                    source=self._source(pace),
                    throttled=pace.throttled,
                    taken=rp.taken(lane.accepted, now, self.window),
                    failing_since=lane.failing_since,
                    error=lane.error,
                    window=self.window,
                )
            )
        return views

    async def aclose(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._timer
