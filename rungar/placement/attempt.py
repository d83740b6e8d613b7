"""Placing one runner: a plan of what to try, then trying it in order until one creates it.

:func:`plan_placement` is the decision, a value computed from the :class:`Fleet`'s state
without changing it: the providers to try, in the scale set's placement order, and why each
other one is skipped (a reason of :mod:`rungar.model.sentences`). :func:`try_plan` carries a
plan out; it decides nothing but what a provider's answer forces: each provider's place is
claimed when it is tried (a create that finished meanwhile may have taken the last one), and
the :class:`Fleet` records; the caller's callables talk to providers. :func:`place` is both.

- A refusal of any kind: the leftover is deleted, the scale set backs off that provider, and
  the next provider is tried at once. If the leftover cannot be deleted, placement stops: the
  stranded machine holds the runner's name.
- No answer: the provider is skipped by every scale set until it answers; the create's outcome
  is settled by name (``settle``) before anything else happens to the runner.
- Out of time (``TimeoutError``): recorded as failing for that provider; nothing else is tried.
- Cancelled by the caller: nothing is recorded; the leftover is still deleted.
- When no provider takes the runner, the providers found full are held for the scale set,
  unless the runner was an idle-reserve refill (``reserve``): only assigned work holds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from enum import StrEnum

from rungar.errors import ProviderError, ProviderUnavailable
from rungar.model.machine import Created, Machine, Refusal, RefusalKind
from rungar.placement.fleet import Claim, Fleet, Skip


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

    def __str__(self) -> str:
        tried = " then ".join(self.order) or f"nothing ({self.why_none})"
        skipped = "; ".join(str(skip) for skip in self.skips)
        return f"try {tried}" + (f"; skip {skipped}" if skipped else "")


def plan_placement(
    fleet: Fleet, scale_set: str, now: float, *, reserve: bool = False
) -> PlacementPlan:
    """The placement decision for one runner now: reads the fleet, changes nothing."""
    found = fleet.candidates(scale_set, now, reserve=reserve)
    why_none = "" if found.any else found.why_none()
    return PlacementPlan(scale_set, found.order, found.skips, reserve, why_none)


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


CreateFn = Callable[[str], Awaitable[Created | Refusal]]
DeleteFn = Callable[[str], Awaitable[None]]
SettleFn = Callable[[str], Awaitable[Created | None]]
Observer = Callable[[str, Try], None]


async def place(
    fleet: Fleet,
    scale_set: str,
    *,
    now: Callable[[], float],
    create: CreateFn,
    delete: DeleteFn,
    settle: SettleFn,
    observe: Observer | None = None,
    reserve: bool = False,
) -> Placed | NotPlaced:
    """Plan the runner's placement now, then try the plan."""
    plan = plan_placement(fleet, scale_set, now(), reserve=reserve)
    return await try_plan(
        fleet, plan, now=now, create=create, delete=delete, settle=settle, observe=observe
    )


async def try_plan(
    fleet: Fleet,
    plan: PlacementPlan,
    *,
    now: Callable[[], float],
    create: CreateFn,
    delete: DeleteFn,
    settle: SettleFn,
    observe: Observer | None = None,
) -> Placed | NotPlaced:
    """Try the plan's providers in its order; ``create`` raises TimeoutError once the
    runner's :class:`CreateBudget` is spent. The result carries the plan."""
    result = await _try_in_order(fleet, plan, now, create, delete, settle, observe)
    return replace(result, plan=plan)


async def _try_in_order(
    fleet: Fleet,
    plan: PlacementPlan,
    now: Callable[[], float],
    create: CreateFn,
    delete: DeleteFn,
    settle: SettleFn,
    observe: Observer | None,
) -> Placed | NotPlaced:
    scale_set, reserve = plan.scale_set, plan.reserve
    tries: list[Try] = []

    def note(entry: Try) -> None:
        tries.append(entry)
        if observe is not None:
            observe(scale_set, entry)

    for provider in plan.order:
        claim = fleet.claim(scale_set, provider, now(), reserve=reserve)
        if isinstance(claim, Skip):
            note(Try(provider, Outcome.SKIPPED, claim.reason))
            continue
        try:
            result = await create(provider)
        except ProviderUnavailable as e:
            fleet.record_unanswered(provider)
            note(Try(provider, Outcome.UNANSWERED, str(e) or "does not answer"))
            placed = await _settle(fleet, claim, settle, now, tries)
            if placed is not None:
                return placed
            fleet.release(claim)
            return NotPlaced(f"{provider} did not answer", tuple(tries), stranded_on=provider)
        except ProviderError as e:
            result = Refusal(RefusalKind.FAILED, str(e))
        except TimeoutError:
            fleet.release(claim)
            refusal = Refusal(RefusalKind.FAILED, RAN_OUT)
            fleet.record_refusal(scale_set, provider, refusal, now())
            note(Try(provider, Outcome.TIMED_OUT, refusal.message, refusal))
            deleted = await _delete_leftover(delete, provider)
            return NotPlaced(
                "ran out of time", tuple(tries), stranded_on="" if deleted else provider
            )
        except asyncio.CancelledError:
            fleet.release(claim)
            await _delete_leftover(delete, provider)
            raise
        if isinstance(result, Created):
            fleet.record_created(claim, now())
            note(Try(provider, Outcome.CREATED))
            return Placed(provider, result.machine, tuple(tries))
        fleet.release(claim)
        fleet.record_refusal(scale_set, provider, result, now())
        note(Try(provider, Outcome.REFUSED, result.message, result))
        if not await _delete_leftover(delete, provider):
            return NotPlaced(
                f"{provider}: {result.message}; its leftover could not be deleted",
                tuple(tries),
                stranded_on=provider,
            )
    if not reserve:
        fleet.hold_full_providers(scale_set, now())
    if not tries:
        return NotPlaced(plan.why_none, ())
    return NotPlaced(
        "no provider took the runner: " + "; ".join(f"{t.provider}: {t.message}" for t in tries),
        tuple(tries),
    )


async def _settle(
    fleet: Fleet, claim: Claim, settle: SettleFn, now: Callable[[], float], tries: list[Try]
) -> Placed | None:
    try:
        settled = await settle(claim.provider)
    except ProviderError:
        return None
    if settled is None:
        return None
    fleet.record_created(claim, now())
    tries.append(Try(claim.provider, Outcome.CREATED, "settled after no answer"))
    return Placed(claim.provider, settled.machine, tuple(tries))


async def _delete_leftover(delete: DeleteFn, provider: str) -> bool:
    """Delete whatever a failed create left; shielded so a cancellation still cleans up."""
    try:
        await asyncio.shield(delete(provider))
    except (ProviderError, TimeoutError, asyncio.CancelledError):
        return False
    return True
