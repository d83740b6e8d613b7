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

A scale set with ``hold: soonest_room`` (opt-in; ``every_full`` is the default) holds fewer:
of the providers it found full, the one whose last FULL refusal expects room for its runner
soonest (a refusal may say when, docs/placement.md), those expected within ``hold_margin`` of
it, those that said nothing of when, and those it holds already, whose drained room is not
given up for a later estimate (:func:`providers_to_hold`). Lower priorities keep using the
rest.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum


class HoldRule(StrEnum):
    EVERY_FULL = "every_full"  # the default: every provider found full is held
    ONE = "one"  # one of them, the one with the fewest runners (comparison only)


def providers_to_hold(
    full: Sequence[str],
    expected: Mapping[str, float],
    held: Collection[str],
    now: float,
    margin: float,
) -> list[str]:
    """Under ``hold: soonest_room``: of ``full`` (in order), those to hold. ``expected``: when
    each provider's last FULL refusal expects room for the scale set's runner (a moment passed
    counts as now); ``held``: the providers the scale set holds now. Every one when none said
    when."""
    known = {p: max(now, expected[p]) for p in full if p in expected}
    if not known:
        return list(full)
    soonest = min(known.values())
    return [p for p in full if p not in known or known[p] <= soonest + margin or p in held]


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


class Holds:
    """Who waits for room where: the priority holds by provider, the providers each scale
    set's assigned work waits on (other scale sets' reserve refills keep off them), and how
    long each scale set's work has been finding nothing to try (what ``overflow_after``
    counts). Each lapses ``duration`` (``hold_duration``) after it was last renewed."""

    def __init__(self, duration: float) -> None:
        self.duration = duration
        self._holds: dict[str, Hold] = {}
        self._work_waits: dict[str, dict[str, float]] = {}  # provider -> scale set -> since
        self._asking: dict[str, tuple[float, float]] = {}  # scale set -> (since, last) no room
        # (scale set, provider) -> when its last FULL refusal expects room (hold: soonest_room)
        self._rooms: dict[tuple[str, str], float] = {}

    def keep_only(
        self, providers: Collection[str], scale_sets: Collection[str], pairs: set[tuple[str, str]]
    ) -> None:
        """A new configuration: a removed scale set asks no more, and its holds end with it."""
        self._holds = {
            k: v for k, v in self._holds.items() if k in providers and v.holder in scale_sets
        }
        self._work_waits = {
            p: {s: t for s, t in waits.items() if (s, p) in pairs}
            for p, waits in self._work_waits.items()
        }
        self._asking = {s: v for s, v in self._asking.items() if s in scale_sets}
        self._rooms = {k: v for k, v in self._rooms.items() if k in pairs}

    # ----------------------------------------------------------------- holds

    def current(self, provider: str) -> Hold | None:
        """The provider's hold, lapsed or not."""
        return self._holds.get(provider)

    def on(self, provider: str, now: float) -> Hold | None:
        """The provider's hold while it lasts."""
        hold = self._holds.get(provider)
        if hold is not None and hold.active(now, self.duration):
            return hold
        return None

    def keeps_off(self, scale_set: str, priority: int, provider: str, now: float) -> str:
        """The holder that keeps ``scale_set`` (of ``priority``) off ``provider`` now, or ""."""
        hold = self._holds.get(provider)
        if (
            hold is not None
            and hold.holder != scale_set
            and hold.holds_back(priority, now, self.duration)
        ):
            return hold.holder
        return ""

    def release(self, scale_set: str) -> None:
        """The scale set placed its runner: every hold it has ends, on whichever provider.
        Another scale set's hold stays, whatever the priorities: it ends when its holder places
        its runner or stops asking (it then lapses after ``duration``)."""
        for provider in [p for p, hold in self._holds.items() if hold.holder == scale_set]:
            del self._holds[provider]

    def held_by(self, scale_set: str, now: float) -> list[str]:
        """The providers ``scale_set`` holds now."""
        return [
            p for p, hold in self._holds.items()
            if hold.holder == scale_set and hold.active(now, self.duration)
        ]  # fmt: skip

    def room_expected(self, scale_set: str, provider: str, at: float | None) -> None:
        """A FULL refusal of ``provider`` expects room for ``scale_set``'s runner at ``at``
        (None: it said nothing of when)."""
        if at is None:
            self._rooms.pop((scale_set, provider), None)
        else:
            self._rooms[(scale_set, provider)] = at

    def rooms_expected(self, scale_set: str) -> dict[str, float]:
        """Provider -> when its last FULL refusal expects room for ``scale_set``'s runner."""
        return {p: at for (s, p), at in self._rooms.items() if s == scale_set}

    def every(self) -> list[Hold]:
        return list(self._holds.values())

    def restore(self, hold: Hold) -> None:
        self._holds[hold.provider] = hold

    # ----------------------------------------------------------------- waits

    def apply(self, decision: HoldDecision) -> tuple[Hold, ...]:
        """Carry out a :class:`HoldDecision`; returns the holds newly placed."""
        for provider in decision.waited_on:
            self._work_waits.setdefault(provider, {})[decision.scale_set] = decision.at
        if decision.waiting:
            since = decision.at
            asking = self._asking.get(decision.scale_set)
            if asking is not None and decision.at - asking[1] <= self.duration:
                since = asking[0]
            self._asking[decision.scale_set] = (since, decision.at)
        for hold in decision.holds:
            self._holds[hold.provider] = hold
        return decision.placed

    def placed(self, scale_set: str, *, overflowing: bool) -> None:
        """The scale set placed its runner: its holds end and it waits on no provider; its
        asking ends too unless the room was found by overflowing (a provider with
        ``overflow_after``)."""
        self.release(scale_set)
        self._rooms = {k: v for k, v in self._rooms.items() if k[0] != scale_set}
        if not overflowing:
            self._asking.pop(scale_set, None)
        for waits in self._work_waits.values():
            waits.pop(scale_set, None)

    def asking_for(self, scale_set: str, now: float) -> float:
        """How long this scale set's assigned work has been finding nothing to try (renewed
        within ``duration``); 0 when it is not."""
        asking = self._asking.get(scale_set)
        if asking is None or now - asking[1] > self.duration:
            return 0.0
        return now - asking[0]

    def waiting_for_room(self, provider: str, now: float, besides: str = "") -> list[str]:
        """Scale sets whose assigned jobs wait for room on ``provider`` (oldest first)."""
        waits = self._work_waits.get(provider, {})
        return [
            s
            for s, since in sorted(waits.items(), key=lambda item: item[1])
            if s != besides and now - since <= self.duration
        ]
