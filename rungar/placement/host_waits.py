"""Waiting for a host's expected room rather than going to a priced provider (docs/placement.md,
"Waiting for a host's expected room"; a provider's ``overflow: when_host_is_later``, opt-in).

A host that refuses a runner as FULL may say when it expects room for it (the refusal's
``room_expected``: seconds from its answer, and how sure it is). A priced provider with
``overflow: when_host_is_later`` takes a runner of a scale set only when no cheaper provider of
that scale set expects room sooner than the priced provider's typical start plus its
``overflow_margin``: otherwise the runner waits for the host, and is tried there at the
expected time. The wait is bounded: once the scale set has waited that long (typical start plus
margin, counted from the refusal that began its wait), the priced provider takes it, as a
runner that went there at once would have been online by then.

The typical start is the median of the provider's last :data:`START_SAMPLES` starts (from its
Create to the runner online), once :data:`START_MINIMUM` have been measured; before that, its
``typical_start``.

Pure: every call takes ``now``; nothing reads a clock.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from rungar.model.machine import RoomExpected

START_SAMPLES = 20  # the typical start is the median of a provider's last starts, this many
START_MINIMUM = 5  # measured starts before they replace the configured typical_start
CONFIDENT = 0.5  # an expected room less sure than this is not waited for


@dataclass(frozen=True, slots=True)
class ExpectedRoom:
    """A host's word that room for a scale set's runner comes at ``at`` (the engine's clock),
    as sure as ``confidence``; ``retry_at``: when the scale set tries the host again."""

    provider: str
    at: float
    confidence: float
    told: float
    retry_at: float

    def left(self, now: float) -> float:
        return max(0.0, self.at - now)


@dataclass(frozen=True, slots=True)
class HostWait:
    """A scale set's runner kept off a priced provider to wait for a host's expected room."""

    scale_set: str
    provider: str  # the priced provider it keeps off
    host: ExpectedRoom  # the room it waits for
    since: float  # when its wait began


def host_to_wait_for(
    expected: Iterable[ExpectedRoom], now: float, patience: float, since: float
) -> ExpectedRoom | None:
    """The decision: of the rooms cheaper hosts expect, the one to wait for instead of a priced
    provider whose typical start plus margin is ``patience``; None to go there now.

    The soonest room expected within ``patience`` from now (sure enough, :data:`CONFIDENT`),
    while the wait that began at ``since`` has lasted less than ``patience``. A room whose time
    has passed counts as due now: the host is tried again at it, and its new answer replaces
    it."""
    if now - since >= patience:
        return None
    best: ExpectedRoom | None = None
    for room in expected:
        if room.confidence < CONFIDENT or room.left(now) >= patience:
            continue
        if best is None or room.at < best.at:
            best = room
    return best


class StartTimes:
    """Each provider's starts, from its Create to the runner online: the last
    :data:`START_SAMPLES` seconds, for its typical start."""

    def __init__(self) -> None:
        self._starts: dict[str, deque[float]] = {}

    def record(self, provider: str, seconds: float) -> None:
        if seconds >= 0 and seconds == seconds:  # never a negative or NaN start
            self._starts.setdefault(provider, deque(maxlen=START_SAMPLES)).append(seconds)

    def typical(self, provider: str, configured: float) -> float:
        """The median of its measured starts once there are :data:`START_MINIMUM`, else
        ``configured`` (the provider's ``typical_start``)."""
        starts = self._starts.get(provider)
        if starts is None or len(starts) < START_MINIMUM:
            return configured
        return float(statistics.median(starts))

    def measured(self, provider: str) -> int:
        starts = self._starts.get(provider)
        return len(starts) if starts is not None else 0


class HostRooms:
    """The rooms hosts expect for each scale set's runners, from their FULL refusals, and when
    each scale set's wait for them began. A scale set that places a runner forgets its own."""

    def __init__(self) -> None:
        self._rooms: dict[str, dict[str, ExpectedRoom]] = {}  # scale set -> provider -> room
        self._since: dict[str, float] = {}  # scale set -> its wait began

    def told(
        self,
        scale_set: str,
        provider: str,
        room: RoomExpected,
        now: float,
        *,
        retry_at: float,
        patience: float,
    ) -> ExpectedRoom:
        """A FULL refusal said when room comes; it replaces what that provider said before. A
        wait whose every room was due and told more than ``patience`` ago ended unplaced (its
        job ran elsewhere): this begins a new one."""
        rooms = self._rooms.setdefault(scale_set, {})
        if rooms and all(now - r.at > patience and now - r.told > patience for r in rooms.values()):
            rooms.clear()
        if not rooms:
            self._since[scale_set] = now
        expected = ExpectedRoom(provider, now + room.seconds, room.confidence, now, retry_at)
        rooms[provider] = expected
        return expected

    def not_told(self, scale_set: str, provider: str) -> None:
        """A FULL refusal that said nothing of when: what that provider said before is void."""
        rooms = self._rooms.get(scale_set)
        if rooms is not None:
            rooms.pop(provider, None)

    def expected(self, scale_set: str) -> list[ExpectedRoom]:
        return list(self._rooms.get(scale_set, {}).values())

    def since(self, scale_set: str, now: float) -> float:
        return self._since.get(scale_set, now)

    def forget(self, scale_set: str) -> None:
        """The scale set placed a runner: its wait ended, wherever it went."""
        self._rooms.pop(scale_set, None)
        self._since.pop(scale_set, None)

    def keep_only(self, scale_sets: Collection[str], providers: Collection[str]) -> None:
        self._rooms = {
            s: {p: r for p, r in rooms.items() if p in providers}
            for s, rooms in self._rooms.items()
            if s in scale_sets
        }
        self._since = {s: t for s, t in self._since.items() if s in scale_sets}
