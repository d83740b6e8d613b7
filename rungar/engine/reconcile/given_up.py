"""A reconcile pass's given-up creates: the plan (:mod:`rungar.engine.reconcile.given_up_plan`)
carried out. A machine left behind by a create given up on is deleted on its provider (a
``left_behind`` event, once per machine), never adopted; the state database keeps what changed
and forgets what is settled.
"""

from __future__ import annotations

import asyncio

import structlog

from rungar.engine.core.context import EngineContext
from rungar.engine.core.notices import note_unanswered
from rungar.engine.reconcile.given_up_plan import GivenUpPlan, LeftBehind
from rungar.errors import ProviderError, ProviderUnavailable
from rungar.model.create_intent import GivenUpCreate
from rungar.model.machine import Removal
from rungar.model.runner import RemovalReason

log = structlog.get_logger("rungar.reconcile")


async def settle_given_up(ctx: EngineContext, plan: GivenUpPlan) -> None:
    for entry in plan.save:
        ctx.store.keep_given_up(entry)
    for entry, why in plan.forget:
        ctx.store.forget_given_up(entry.runner)
        log.info("runner.given_up_settled", runner=entry.runner, provider=entry.provider, why=why)
    for left in plan.delete:
        if left.first:
            _report(ctx, left)
    await asyncio.gather(*(_delete(ctx, left.given_up) for left in plan.delete))


def _report(ctx: EngineContext, left: LeftBehind) -> None:
    entry = left.given_up
    message = (
        f"its create was given up on; its machine appeared on {entry.provider} afterwards "
        "and is deleted there, not adopted"
    )
    ctx.events.record(
        "runner",
        entry.runner,
        "left_behind",
        scale_set=entry.scale_set,
        provider=entry.provider,
        message=message,
        machine_state=left.machine.state.value,
    )
    log.warning(
        "runner.left_behind",
        runner=entry.runner,
        provider=entry.provider,
        scale_set=entry.scale_set,
        sentence=message,
    )


async def _delete(ctx: EngineContext, entry: GivenUpCreate) -> None:
    """Delete the machine; a failure is tried again on the next pass that lists it."""
    if not ctx.acting():
        return  # the lease ran out during the pass: the active daemon deletes it
    provider = entry.provider
    try:
        await ctx.delete_machine(provider, entry.runner, Removal(RemovalReason.NOT_PLACED))
    except (ProviderUnavailable, TimeoutError) as e:
        log.warning("runner.delete_failed", runner=entry.runner, provider=provider, error=str(e))
        if ctx.fleet.record_unanswered(provider):
            note_unanswered(ctx, provider, str(e) or "Delete got no answer")
    except ProviderError as e:
        log.warning("runner.delete_failed", runner=entry.runner, provider=provider, error=str(e))
