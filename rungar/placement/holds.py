"""Priority holds (docs/configuration.md, ``priority``; docs/placement.md).

A scale set whose assigned work finds providers full, and then has no provider left to try,
holds *every* provider it found full against scale sets of strictly lower priority, so that the
next room on any of them is its own (:meth:`rungar.placement.Fleet.plan_holds`). The hold lasts
``hold_duration`` (2 × reconcile_interval) from its last renewal; it is renewed each time the
holder again finds nothing to try, and it ends when its holder places its runner (on any
provider) or stops asking: another scale set placing a runner, whatever its priority, ends no
hold but its own. Equal priorities never hold each other back. It is not a reservation.

Room that opens on a held provider goes to its holder at once: the holder's backoff there is
lifted and the caller is told to try it (:class:`RoomOpened`).

:attr:`HoldRule.ONE` is the older rule, kept for comparison in ``rungar simulate`` and the
benchmarks only: one provider held, the one with the fewest runners counted on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class HoldRule(StrEnum):
    EVERY_FULL = "every_full"  # the default: every provider found full is held
    ONE = "one"  # one of them, the one with the fewest runners (comparison only)


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


@dataclass(frozen=True, slots=True)
class HoldDecision:
    """What a scale set's assigned work finding nothing to try decides about holds, computed
    without changing the fleet; :meth:`rungar.placement.Fleet.apply_holds` carries it out.

    ``waited_on``: every provider it is skipping as full (other scale sets' reserve refills
    keep off them); ``holds``: the holds it places or renews; ``placed``: those of them that
    are new rather than renewals (the ones worth an event); ``waiting``: its work waits for
    room (not at its own ``max_runners``), which a provider's ``overflow_after`` counts."""

    scale_set: str
    at: float
    waited_on: tuple[str, ...] = ()
    holds: tuple[Hold, ...] = ()
    placed: tuple[Hold, ...] = ()
    waiting: bool = True  # its work waits for room (False: at its own max_runners)


@dataclass(frozen=True, slots=True)
class RoomOpened:
    """Room opened on ``provider`` (a machine deleted; a create there abandoned, or refused
    for any reason but being full).

    ``holder``: the scale set holding the provider, whose backoff there was lifted so it is
    tried there at once (empty when nobody holds it, or the room was its own create's);
    ``forgiven``: the scale sets whose FULL backoff there was lifted."""

    provider: str
    at: float
    holder: str = ""
    forgiven: tuple[str, ...] = ()


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
