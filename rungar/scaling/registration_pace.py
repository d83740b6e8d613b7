"""Which registration goes next, and when: GitHub's JIT-config throttle, as a pure decision
(docs/github.md, "Registration pace").

GitHub limits how fast an installation registers runners and answers 429 with ``Retry-After``
past the limit. One pace is shared by every scale set of the installation. While GitHub has
never pushed back, registrations go at once (the daemon's parallel-create bound is the only
limit). After a 429, the pace is what GitHub let through in the trailing minute, less a small
margin so jitter in the arrival times does not trip the limit again, and nothing is sent before
the ``Retry-After`` has passed. A configured pace (``registrations_per_minute``) is used from the
start instead; a 429 still lowers it.

Once GitHub stops answering 429 and the pace holds nothing back, the learned pace relaxes: each
whole ``relax_every`` (a minute) with no 429 and no registration waiting for the pace halves
the wait between registrations (:func:`relaxed`), up to the configured pace if there is one. So
a burst minutes after a throttle is not held to that throttle's pace (after five quiet minutes
it goes 32 times as fast, and a 429 past GitHub's limit sets the pace anew). While registrations
do wait for the pace, it is the pace that keeps GitHub from answering 429, which says nothing of
a raised limit; relaxing then would only probe the limit and stall the queue for each probe's
``Retry-After`` (:func:`binding`). A learned pace is forgotten altogether after ``forget_after``
without a 429, so a limit GitHub raised during a long burst is found again too.

Few registrations are sent and unanswered at once: the calls already on their way when GitHub
answers its first 429 are refused too. The bound (:func:`in_flight_bound`) is
``most_in_flight`` (4 by default) or ``in_flight_share`` (2 %) of the registrations GitHub took
in the trailing minute, whichever is more: GitHub's limit is at least what it took, so the
calls refused with the first 429 stay within the pace's margin of it, and a burst GitHub keeps
up with is not held to 4 calls at a time (which costs a 2,000-job burst about a third more
CPU a runner: docs/benchmarks.md).

The waiting registrations are served in priority order: runners for assigned jobs before
refills of the idle reserve (``min_runners``, the warm pool), and within each, the scale set of
the higher ``priority`` first; equal keys in the order they came.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import NamedTuple

WINDOW = 60.0  # GitHub states its throttle per minute (``registration_pace_window``)


class RegistrationKey(NamedTuple):
    """A waiting registration's place in the queue: the smallest goes first. A named tuple,
    not an ordered dataclass: the queue takes the smallest of the waiting ones for every
    registration of a burst, and tuples compare in C (docs/benchmarks.md)."""

    refill: bool  # False (a runner for assigned jobs) sorts first
    rank: int  # minus the scale set's priority: the higher priority sorts first
    seq: int  # arrival order among equals

    @classmethod
    def of(cls, *, refill: bool, priority: int, seq: int) -> RegistrationKey:
        return cls(refill, -priority, seq)


@dataclass(frozen=True, slots=True)
class Pace:
    """The installation's pace: ``per_minute`` 0 sends at once; ``next_at`` is the earliest
    moment the next registration may be sent; ``learned_at`` when a 429 last set the pace (0:
    never). The times of the registrations GitHub took are the caller's to keep (a
    :func:`trailing` deque, appended to at each acceptance): a 429 counts them."""

    per_minute: float = 0.0
    next_at: float = 0.0
    learned_at: float = 0.0
    configured: float = 0.0
    throttled: int = 0  # 429s GitHub answered, all told
    # When the learned pace last relaxed, last held a registration back, or its 429's
    # Retry-After ended, whichever is latest: relaxing counts from it.
    relaxed_at: float = 0.0

    @property
    def learned(self) -> bool:
        return self.learned_at > 0

    def interval(self) -> float:
        return WINDOW / self.per_minute if self.per_minute > 0 else 0.0


@dataclass(frozen=True, slots=True)
class Grant:
    key: RegistrationKey
    at: float


def start(configured: float = 0.0) -> Pace:
    return Pace(per_minute=configured, configured=configured)


def next_grant(
    first: RegistrationKey | None,
    pace: Pace,
    now: float,
    *,
    in_flight: int = 0,
    most_in_flight: int = 0,
) -> Grant | None:
    """When the first waiting registration in priority order (the smallest key: the caller
    keeps them in a heap) goes: at the pace's next moment (now, when that has passed); None
    when none waits, or while ``most_in_flight`` registrations (0: no bound) are sent and not
    answered yet: a 429 comes back to each call already sent, so few are in the air when
    GitHub first pushes back."""
    if first is None or (most_in_flight > 0 and in_flight >= most_in_flight):
        return None
    return Grant(first, max(now, pace.next_at))


def in_flight_bound(most_in_flight: int, in_flight_share: float, took: int) -> int:
    """Registrations that may be sent and unanswered at once, GitHub having taken ``took`` in
    the trailing minute: ``most_in_flight`` or ``in_flight_share`` of ``took``, whichever is
    more; 0 (no bound) when ``most_in_flight`` is 0."""
    if most_in_flight <= 0:
        return 0
    return max(most_in_flight, int(in_flight_share * took))


def granted(pace: Pace, at: float) -> Pace:
    """The pace after a registration was let go at ``at``."""
    return replace(pace, next_at=at + pace.interval())


def returned(pace: Pace, at: float) -> Pace:
    """A granted registration that was never sent (its demand went away): its moment is free."""
    return replace(pace, next_at=min(pace.next_at, at))


def trailing(times: deque[float], at: float, window: float = WINDOW) -> None:
    """Record that GitHub took a registration sent at ``at``: appended to ``times``, those a
    ``window`` older than it dropped (:func:`forget`). Constant time a registration, where a
    tuple rebuilt each time was not."""
    times.append(at)
    forget(times, at, window)


def forget(times: deque[float], now: float, window: float = WINDOW) -> None:
    """Drop the times a ``window`` older than ``now`` from the front of ``times``. Answers come
    back nearly in the order they were sent, so an older one may stay behind a newer one until
    that goes: ``len(times)`` is what GitHub took in the trailing minute give or take those few
    (enough for :func:`in_flight_bound`), and :func:`taken` counts exactly."""
    while times and times[0] <= now - window:
        times.popleft()


def taken(times: Iterable[float], now: float, window: float = WINDOW) -> int:
    """How many of ``times`` fall in the trailing ``window`` before ``now``."""
    return sum(1 for t in times if t > now - window)


def throttled(
    pace: Pace,
    now: float,
    retry_after: float,
    margin: float,
    took: int,
    window: float = WINDOW,
) -> Pace:
    """GitHub answered 429, having taken ``took`` registrations in the trailing ``window``
    (:func:`taken`; GitHub states its limit per minute, and a shorter window is for runs
    against an emulator that keeps a shorter one): the pace becomes that a minute less
    ``margin`` (a fraction), never more than the pace already in force, and nothing is sent
    before ``retry_after`` seconds from now."""
    limit = max(1.0, took * (WINDOW / window) * (1.0 - margin))
    if pace.per_minute > 0:
        limit = min(limit, pace.per_minute) if took else pace.per_minute * (1.0 - margin)
    return replace(
        pace,
        per_minute=limit,
        next_at=max(pace.next_at, now + max(0.0, retry_after)),
        learned_at=now,
        throttled=pace.throttled + 1,
        relaxed_at=now + max(0.0, retry_after),
    )


def binding(pace: Pace, until: float) -> Pace:
    """A registration waits for the pace until ``until``: a learned pace relaxes only a whole
    ``relax_every`` after that (:func:`relaxed`)."""
    if not pace.learned or until <= pace.relaxed_at:
        return pace
    return replace(pace, relaxed_at=until)


MOST_RELAX_STEPS = 32  # a pace doubled this often is no bound at all (and stays a finite float)


def relaxed(pace: Pace, now: float, every: float) -> Pace:
    """A learned pace with no 429 and no registration held back by it for ``every`` seconds
    (counted from the latest of the end of the last 429's ``Retry-After``, the last moment it
    held one back, and its last relaxation) doubles, once for each whole ``every`` gone: the
    wait between registrations halves. Never above a configured pace;
    ``every`` 0 never relaxes. The next registration's moment comes no later than one new
    interval from now."""
    if not pace.learned or every <= 0 or pace.per_minute <= 0 or now < pace.relaxed_at + every:
        return pace
    steps = int((now - pace.relaxed_at) // every)
    per_minute = pace.per_minute * 2.0 ** min(steps, MOST_RELAX_STEPS)
    if pace.configured > 0:
        per_minute = min(per_minute, max(pace.configured, pace.per_minute))
    interval = WINDOW / per_minute
    return replace(
        pace,
        per_minute=per_minute,
        next_at=min(pace.next_at, now + interval),
        relaxed_at=pace.relaxed_at + steps * every,
    )


def forgotten(pace: Pace, now: float, forget_after: float) -> Pace:
    """A learned pace older than ``forget_after`` without a 429 gives way to the configured
    one (or none): GitHub may have raised its limit."""
    if not pace.learned or forget_after <= 0 or now - pace.learned_at < forget_after:
        return pace
    return replace(pace, per_minute=pace.configured, learned_at=0.0, relaxed_at=0.0)
