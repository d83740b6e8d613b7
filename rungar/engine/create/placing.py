"""Carrying out a placement plan: trying its providers in order until one creates the runner.

The plan is the pure decision (:func:`rungar.placement.plan.plan_placement`); this loop decides
nothing but what a provider's answer forces, and applies to the :class:`Fleet` what happened:
each provider's place is claimed when it is tried (a create that finished meanwhile may have
taken the last one), a refusal backs the scale set off that provider, and when nothing took
the runner the holds the fleet then decides (:meth:`Fleet.plan_holds`) are applied and
returned for the caller to report. The caller's callables talk to the providers, so the
engine, ``rungar simulate`` and the test kit all run this same loop.

Room that a create gives back — abandoned, or refused for any reason but being full — is
reported to ``on_room`` (the provider's holder is to be tried there at once).

A create whose answer is not believed (:class:`Untrusted`: a machine named other than the one
asked for) is that provider's refusal and ends the attempt: the registration it was handed
may run on a machine Rungar does not know, so it is never handed to another provider. When
that registration has taken a job already (``keep_leftover``), no machine there is deleted:
the caller keeps them as given up on, deleted once the job has ended.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace

from rungar.errors import ProviderError, ProviderUnavailable
from rungar.model.machine import Created, Refusal, RefusalKind
from rungar.placement.fleet import Claim, Fleet, Skip
from rungar.placement.holds import RoomOpened
from rungar.placement.plan import (
    RAN_OUT,
    NotPlaced,
    Outcome,
    Placed,
    PlacementPlan,
    Try,
    plan_placement,
)


class Untrusted(Exception):
    """A create's answer not believed: its provider's ``refusal``, after which the runner is
    tried on no other provider. ``keep_leftover``: its registration may be running a job on a
    machine there, so its leftover is not deleted now."""

    def __init__(self, refusal: Refusal, *, keep_leftover: bool = False) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal
        self.keep_leftover = keep_leftover


CreateFn = Callable[[str], Awaitable[Created | Refusal]]
DeleteFn = Callable[[str], Awaitable[None]]
SettleFn = Callable[[str], Awaitable[Created | None]]
Observer = Callable[[str, Try], None]
RoomFn = Callable[[RoomOpened], None]


async def place(
    fleet: Fleet,
    scale_set: str,
    *,
    now: Callable[[], float],
    create: CreateFn,
    delete: DeleteFn,
    settle: SettleFn,
    observe: Observer | None = None,
    on_room: RoomFn | None = None,
    reserve: bool = False,
    cheaper_than: float | None = None,
) -> Placed | NotPlaced:
    """Plan the runner's placement now, then try the plan."""
    plan = plan_placement(fleet, scale_set, now(), reserve=reserve, cheaper_than=cheaper_than)
    return await try_plan(
        fleet,
        plan,
        now=now,
        create=create,
        delete=delete,
        settle=settle,
        observe=observe,
        on_room=on_room,
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
    on_room: RoomFn | None = None,
) -> Placed | NotPlaced:
    """Try the plan's providers in its order; ``create`` raises TimeoutError once the
    runner's :class:`rungar.placement.plan.CreateBudget` is spent. The result carries the
    plan, and a :class:`NotPlaced` the holds newly placed (``held``)."""
    loop = _Attempt(fleet, plan, now, observe, on_room)
    result = await loop.run(create, delete, settle)
    if isinstance(result, NotPlaced) and not plan.reserve:
        # Nothing tried: the plan's own decision; else decided afresh, after the refusals.
        decision = plan.holds if not result.tries and plan.holds is not None else None
        held = fleet.apply_holds(decision or fleet.plan_holds(plan.scale_set, now()))
        result = replace(result, held=held)
    return replace(result, plan=plan)


class _Attempt:
    def __init__(
        self,
        fleet: Fleet,
        plan: PlacementPlan,
        now: Callable[[], float],
        observe: Observer | None,
        on_room: RoomFn | None,
    ) -> None:
        self.fleet = fleet
        self.plan = plan
        self.now = now
        self.observe = observe
        self.on_room = on_room
        self.tries: list[Try] = []

    def note(self, entry: Try) -> None:
        self.tries.append(entry)
        if self.observe is not None:
            self.observe(self.plan.scale_set, entry)

    def give_back(self, claim: Claim, *, full: bool = False) -> None:
        opened = self.fleet.abandon(claim, self.now(), full=full)
        if opened is not None and opened.holder and self.on_room is not None:
            self.on_room(opened)

    async def run(self, create: CreateFn, delete: DeleteFn, settle: SettleFn) -> Placed | NotPlaced:
        fleet, scale_set, reserve = self.fleet, self.plan.scale_set, self.plan.reserve
        for provider in self.plan.order:
            untrusted = keep_leftover = False
            claim = fleet.claim(scale_set, provider, self.now(), reserve=reserve)
            if isinstance(claim, Skip):
                self.note(Try(provider, Outcome.SKIPPED, claim.reason))
                continue
            try:
                result = await create(provider)
            except ProviderUnavailable as e:
                fleet.record_unanswered(provider)
                self.note(Try(provider, Outcome.UNANSWERED, str(e) or "does not answer"))
                placed = await self.settle(claim, settle)
                if placed is not None:
                    return placed
                self.give_back(claim)
                return NotPlaced(f"{provider} did not answer", tuple(self.tries), provider)
            except ProviderError as e:
                result = Refusal(RefusalKind.FAILED, str(e))
            except Untrusted as e:
                result, untrusted, keep_leftover = e.refusal, True, e.keep_leftover
            except TimeoutError:
                self.give_back(claim)
                refusal = Refusal(RefusalKind.FAILED, RAN_OUT)
                fleet.record_refusal(scale_set, provider, refusal, self.now())
                self.note(Try(provider, Outcome.TIMED_OUT, refusal.message, refusal))
                deleted = await self.delete_leftover(delete, provider)
                return NotPlaced(
                    "ran out of time", tuple(self.tries), stranded_on="" if deleted else provider
                )
            except asyncio.CancelledError:
                self.give_back(claim)
                await self.delete_leftover(delete, provider)
                raise
            if isinstance(result, Created):
                fleet.record_created(claim, self.now())
                self.note(Try(provider, Outcome.CREATED))
                return Placed(provider, result.machine, tuple(self.tries))
            self.give_back(claim, full=result.kind is RefusalKind.FULL)
            fleet.record_refusal(scale_set, provider, result, self.now())
            self.note(Try(provider, Outcome.REFUSED, result.message, result))
            if keep_leftover:
                return NotPlaced(
                    f"{provider}: {result.message}; its registration runs a job there, so its "
                    "machines are deleted once the job has ended",
                    tuple(self.tries),
                    stranded_on=provider,
                )
            if not await self.delete_leftover(delete, provider):
                return NotPlaced(
                    f"{provider}: {result.message}; its leftover could not be deleted",
                    tuple(self.tries),
                    stranded_on=provider,
                )
            if untrusted:
                return NotPlaced(
                    f"{provider}: {result.message}; its registration is given to no other provider",
                    tuple(self.tries),
                )
        if not self.tries:
            return NotPlaced(self.plan.why_none, ())
        return NotPlaced(
            "no provider took the runner: "
            + "; ".join(f"{t.provider}: {t.message}" for t in self.tries),
            tuple(self.tries),
        )

    async def settle(self, claim: Claim, settle: SettleFn) -> Placed | None:
        try:
            settled = await settle(claim.provider)
        except ProviderError:
            return None
        if settled is None:
            return None
        self.fleet.record_created(claim, self.now())
        self.tries.append(Try(claim.provider, Outcome.CREATED, "settled after no answer"))
        return Placed(claim.provider, settled.machine, tuple(self.tries))

    async def delete_leftover(self, delete: DeleteFn, provider: str) -> bool:
        """Delete whatever a failed create left; shielded so a cancellation still cleans up.
        A delete that gets no answer marks the provider unreachable, as a Create's does."""
        try:
            await asyncio.shield(delete(provider))
        except (ProviderUnavailable, TimeoutError):
            self.fleet.record_unanswered(provider)
            return False
        except (ProviderError, asyncio.CancelledError):
            return False
        return True
