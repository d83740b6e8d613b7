"""Placing one runner: the plan of what to try, and the values its trying ends in.

:func:`plan_placement` is the decision, a value computed from the :class:`Fleet`'s state
without changing it: the providers to try, in the scale set's placement order, and why each
other one is skipped (a reason of :mod:`rungar.model.sentences`); when nothing can be tried
for assigned work, the holds that follow (:class:`rungar.placement.HoldDecision`). The engine
carries a plan out (:mod:`rungar.engine.create.placing`), deciding nothing but what a provider's
answer forces; how that ends:

- A refusal of any kind: the leftover is deleted, the scale set backs off that provider, and
  the next provider is tried at once. If the leftover cannot be deleted, placement stops: the
  stranded machine holds the runner's name.
- No answer: the provider is skipped by every scale set until it answers; the create's outcome
  is settled by name (``settle``) before anything else happens to the runner.
- Out of time (``TimeoutError``): recorded as failing for that provider; nothing else is tried.
- Cancelled by the caller: nothing is recorded; the leftover is still deleted.
- When no provider takes the runner, every provider found full is held for the scale set,
  unless the runner was an idle-reserve refill (``reserve``): only assigned work holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from rungar.model.machine import Machine, Refusal
from rungar.placement.fleet import Fleet, Skip
from rungar.placement.holds import Hold, HoldDecision


class Outcome(StrEnum):
    """How one Create of a runner on one provider ended: the one ``Outcome`` of the runner's
    path (the engine's events, the simulations and the demo read it)."""

    CREATED = "created"
    REFUSED = "refused"
    UNANSWERED = "unanswered"
    SKIPPED = "skipped"  # lost a race for the provider's last place
    TIMED_OUT = "timed_out"


@dataclass(frozen=True, slots=True)
class CreateBudget:
    """The create timeout, the one there is: how long creating one runner may take (its scale
    set's ``start_timeout``) from when it began, on the injected clock. Each Create is asked with
    what is left (the request's ``budget``, which a gRPC provider also takes as its deadline);
    when nothing is left the create is given up, ``ran out of time``."""

    began: float
    seconds: float

    def left(self, now: float) -> float:
        return max(0.0, self.began + self.seconds - now)

    def elapsed(self, now: float) -> float:
        return max(0.0, now - self.began)


RAN_OUT = "ran out of time (start_timeout)"
NOT_CHEAPER = "not cheaper than where the runner it replaces is"


@dataclass(frozen=True, slots=True)
class Try:
    provider: str
    outcome: Outcome
    message: str = ""
    refusal: Refusal | None = None


@dataclass(frozen=True, slots=True)
class PlacementPlan:
    """What to try for one runner of ``scale_set``, in which order, and why not the others."""

    scale_set: str
    order: tuple[str, ...]
    skips: tuple[Skip, ...]
    reserve: bool = False  # an idle-reserve refill: it never holds a provider
    why_none: str = ""  # when ``order`` is empty: why nothing can be tried
    holds: HoldDecision | None = None  # when ``order`` is empty for work: the holds decided

    def __str__(self) -> str:
        tried = " then ".join(self.order) or f"nothing ({self.why_none})"
        skipped = "; ".join(str(skip) for skip in self.skips)
        return f"try {tried}" + (f"; skip {skipped}" if skipped else "")


def plan_placement(
    fleet: Fleet,
    scale_set: str,
    now: float,
    *,
    reserve: bool = False,
    cheaper_than: float | None = None,
) -> PlacementPlan:
    """The placement decision for one runner now: reads the fleet, changes nothing.

    ``cheaper_than``: only providers priced below it are tried (a replacement for an idle
    runner on a priced provider); the others are skipped as ``not cheaper``."""
    found = fleet.candidates(scale_set, now, reserve=reserve)
    order, skips = found.order, found.skips
    if cheaper_than is not None:
        dearer = tuple(p for p in order if fleet.price_of(p) >= cheaper_than)
        order = tuple(p for p in order if p not in dearer)
        skips = skips + tuple(Skip(p, NOT_CHEAPER) for p in dearer)
    why_none = ""
    holds = None
    if not order:
        why_none = found.why_none() if not found.any else NOT_CHEAPER
        if not reserve and cheaper_than is None:
            holds = fleet.plan_holds(scale_set, now)
    return PlacementPlan(scale_set, order, skips, reserve, why_none, holds)


@dataclass(frozen=True, slots=True)
class Placed:
    provider: str
    machine: Machine
    tries: tuple[Try, ...]
    plan: PlacementPlan | None = None


@dataclass(frozen=True, slots=True)
class NotPlaced:
    reason: str
    tries: tuple[Try, ...]
    stranded_on: str = ""  # a provider that may still hold a machine of this runner's name
    plan: PlacementPlan | None = None
    held: tuple[Hold, ...] = ()  # holds newly placed because nothing took the runner
