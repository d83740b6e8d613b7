"""Where to try a runner's machine, and what to answer when no attempt worked (pure).

docs/providers/gcp.md, "What a create does": zones rotate per scale set; in each zone every machine
type of the list is tried before the next zone; a zone that does not offer a type is skipped (that
knowledge is cached for an hour); a type out of quota is not tried in other zones. Only when every
attempt found the cloud full is the answer FULL; a refusal no zone would answer differently (bad
image, permission, rate limit, an uncertain insert) stops the search.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from rungar.cloudkit.search import PlaceAnswer, details, stop_refusal, unoffered_refusal
from rungar.model.machine import Refusal, RefusalKind

OFFER_TTL = 3600.0
FULL_OUTCOMES = frozenset({PlaceAnswer.STOCK, PlaceAnswer.QUOTA})


@dataclass(frozen=True, slots=True)
class Attempt:
    zone: str
    machine_type: str  # "" = the instance template's own type

    def __str__(self) -> str:
        return f"{self.zone}/{self.machine_type or 'template'}"


@dataclass(frozen=True, slots=True)
class Tried:
    attempt: Attempt
    outcome: PlaceAnswer
    detail: str


def rotated(zones: Sequence[str], start: int) -> tuple[str, ...]:
    """The zones beginning at ``start`` (modulo their number), in their written order."""
    if not zones:
        return ()
    k = start % len(zones)
    return tuple(zones[k:]) + tuple(zones[:k])


def plan(zones: Sequence[str], machine_types: Sequence[str]) -> list[Attempt]:
    """Every (zone, type) in order: all types in a zone before the next zone."""
    types = list(machine_types) or [""]
    return [Attempt(z, t) for z in zones for t in types]


@dataclass(slots=True)
class OfferCache:
    """Whether a zone offers a machine type, remembered for ``ttl`` seconds."""

    ttl: float = OFFER_TTL
    _known: dict[tuple[str, str], tuple[bool, float]] = field(default_factory=dict)

    def get(self, zone: str, machine_type: str, now: float) -> bool | None:
        hit = self._known.get((zone, machine_type))
        if hit is None or now - hit[1] >= self.ttl:
            return None
        return hit[0]

    def put(self, zone: str, machine_type: str, offered: bool, now: float) -> None:
        self._known[(zone, machine_type)] = (offered, now)


def settle(tried: Sequence[Tried], unoffered: Sequence[Attempt], region: str) -> Refusal:
    """The refusal for a search that created nothing."""
    if not tried:
        types = (a.machine_type for a in unoffered)
        return unoffered_refusal("zone", region, "machine type", types)
    stopped = stop_refusal(tried, "machine")
    if stopped is not None:
        return stopped
    outcomes = {t.outcome for t in tried}
    if outcomes <= FULL_OUTCOMES:
        resource = (
            "quota"
            if outcomes == {PlaceAnswer.QUOTA}
            else "zone stock"
            if outcomes == {PlaceAnswer.STOCK}
            else "zone stock and quota"
        )
        return Refusal(RefusalKind.FULL, f"every zone is full: {details(tried)}", resource)
    return Refusal(RefusalKind.FAILED, f"no zone created the machine: {details(tried)}", "zone")
