"""Which GitHub App registers the next runner, and when: registrations spread over several Apps
of one organisation, as a pure decision (docs/github.md, "More than one App").

GitHub limits registrations per App installation. With ``github.apps`` listing several Apps,
each keeps a pace of its own (:mod:`rungar.scaling.registration_pace`: learned from its own
429s, relaxed and forgotten on its own), and every waiting registration is still served in the
one priority order of the installation: the first waiting registration (the smallest key) goes
to the App whose pace lets it go soonest. No later key is ever granted while an earlier one
waits, whichever App would take it, so a higher-priority scale set's runners are never
registered after a lower one's that came later. Among Apps free at the same moment, the one
that has taken the fewest in the trailing minute (its registrations in the air counted) goes
first, so registrations spread evenly before any App is throttled; equal ones by the order
they are listed.

An App GitHub refuses (a revoked or suspended App: 401 or 403 on its token or on the
registration) is skipped from then on; after ``retry_after`` it is tried again with one
registration at a time in the air. When every App is failing, every one is tried: the
refusal then reaches the create as it would with one App.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rungar.scaling.registration_pace import Pace, RegistrationKey, next_grant


@dataclass(frozen=True, slots=True)
class AppLane:
    """One App as the decision sees it: its pace, its registrations sent and not answered and
    how many may be (0: no bound), what GitHub took from it in the trailing minute, and since
    when it has been failing (0: it is not)."""

    pace: Pace
    in_flight: int = 0
    most_in_flight: int = 0
    took: int = 0
    failing_since: float = 0.0

    @property
    def failing(self) -> bool:
        return self.failing_since > 0


@dataclass(frozen=True, slots=True)
class LaneGrant:
    lane: int  # the App's index in ``github.apps`` order
    key: RegistrationKey
    at: float


def usable(lanes: Sequence[AppLane], now: float, retry_after: float) -> list[int]:
    """The Apps a registration may go to: those not failing, and those failing for
    ``retry_after`` or longer (tried again); every App when none is left."""
    found = [
        i
        for i, lane in enumerate(lanes)
        if not lane.failing or (retry_after > 0 and now >= lane.failing_since + retry_after)
    ]
    return found or list(range(len(lanes)))


def spread(
    first: RegistrationKey | None,
    lanes: Sequence[AppLane],
    now: float,
    *,
    retry_after: float,
) -> LaneGrant | None:
    """The first waiting registration in priority order, the App it goes to and when: the
    App whose next moment comes soonest, the fewest taken first among equals, then the first
    listed. None when none waits or every usable App has its most registrations in the air
    (an answer frees one). A failing App tried again holds one registration in the air at
    most."""
    if first is None:
        return None
    best: tuple[float, int, int] | None = None
    for i in usable(lanes, now, retry_after):
        lane = lanes[i]
        bound = 1 if lane.failing else lane.most_in_flight
        grant = next_grant(first, lane.pace, now, in_flight=lane.in_flight, most_in_flight=bound)
        if grant is None:
            continue
        rank = (grant.at, lane.took + lane.in_flight, i)
        if best is None or rank < best:
            best = rank
    if best is None:
        return None
    return LaneGrant(best[2], first, best[0])
