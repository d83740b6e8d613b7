"""Priority holds (docs/configuration.md, ``priority``).

A scale set that finds its providers full, and then has no provider left to try, keeps scale
sets of strictly lower priority off one of them so the next room there is its own: the one it
already holds, else the one with the fewest runners counted on it, the first in its order on a
tie (:meth:`rungar.placement.Fleet.hold_full_providers`). Holding every provider that refused
would keep the lower priorities off all of them while the room is needed on one. The hold
lasts ``hold_duration`` (2 × reconcile_interval) from its last renewal; it is renewed each time
the holder again finds nothing to try, and released when a scale set of equal or higher
priority places a runner. Equal priorities never hold each other back. It is not a reservation.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Hold:
    provider: str
    holder: str
    priority: int
    since: float

    def active(self, now: float, duration: float) -> bool:
        return now - self.since <= duration

    def remaining(self, now: float, duration: float) -> float:
        return max(0.0, self.since + duration - now)

    def holds_back(self, priority: int, now: float, duration: float) -> bool:
        return self.active(now, duration) and priority < self.priority


def place_hold(
    current: Hold | None,
    *,
    provider: str,
    holder: str,
    priority: int,
    now: float,
    duration: float,
) -> Hold:
    """The hold after ``holder`` asks for one; an active hold of higher priority stays."""
    if current is not None and current.active(now, duration) and current.priority > priority:
        return current
    return Hold(provider=provider, holder=holder, priority=priority, since=now)
