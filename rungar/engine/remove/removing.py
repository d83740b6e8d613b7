"""Removing runners: the registration first (GitHub refuses while a job runs), then the
machine, now or with a reconcile pass's other deletes.

A removed runner stops counting for its scale set at once (:meth:`Removals.let_go`); its
machine still counts for the provider until a delete succeeds, retried on every pass. Owns
the deletes in flight: at most ``MAX_PARALLEL_DELETES`` at once, one per runner.
"""

from __future__ import annotations

import asyncio

import structlog

from rungar.engine.core.context import EngineContext
from rungar.engine.core.notices import note_crash, note_unanswered, report_crash
from rungar.engine.core.records import RunnerRecord
from rungar.engine.create.rooms import Rooms
from rungar.engine.remove import reruns
from rungar.errors import GitHubError, ProviderError, ProviderUnavailable
from rungar.github.interface import RemoveOutcome
from rungar.model.machine import Conclusion, Removal
from rungar.model.runner import RemovalReason, RunnerState

log = structlog.get_logger("rungar.engine")
# Deletes in flight at once, every provider together: enough that a pass removing many runners
# is not serialised on one slow provider, few enough not to flood a backend.
MAX_PARALLEL_DELETES = 16


class Removals:
    def __init__(self, ctx: EngineContext, rooms: Rooms) -> None:
        self.ctx = ctx
        self.rooms = rooms  # told of room a deleted machine opens
        self._slots = asyncio.Semaphore(MAX_PARALLEL_DELETES)
        self._deleting: set[str] = set()

    async def remove(
        self,
        record: RunnerRecord,
        reason: RemovalReason,
        *,
        forced: bool = False,
        delete: bool = True,
    ) -> bool:
        """The safe way round: registration first (GitHub refuses while a job runs), then the
        machine (now, or with the pass's other deletes when ``delete`` is False). Returns False
        when GitHub says the runner is busy and it was kept."""
        ctx = self.ctx
        if not ctx.acting():
            return False
        if record.state is RunnerState.LEAVING:
            return True
        if record.runner_id and (forced or not record.view().busy):
            try:
                outcome = await ctx.github.remove_runner(record.runner_id)
            except GitHubError as e:
                if not forced:
                    log.warning("runner.unregister_failed", runner=record.name, error=str(e))
                    return False
                outcome = RemoveOutcome.REMOVED
            if outcome is RemoveOutcome.BUSY and not forced:
                record.state = RunnerState.BUSY
                return False
        elif record.view().busy and not forced:
            return False
        self.let_go(record, reason)
        if delete:
            await self.settle_leaving(record)
        return True

    def let_go(
        self, record: RunnerRecord, reason: RemovalReason, conclusion: Conclusion | None = None
    ) -> None:
        """The runner stops counting for its scale set; its machine still counts for the
        provider until deleted, and the provider is told why (its job's conclusion, or the
        reason) with every delete until one succeeds."""
        if record.state is RunnerState.LEAVING:
            return
        ctx = self.ctx
        record.state = RunnerState.LEAVING
        record.left_at = ctx.clock.now()
        record.removal_reason = reason.value
        record.removal = Removal(reason, conclusion, record.hint)
        ctx.fleet.remove_runner(record.scale_set, record.provider, leaving=True)
        if not record.connected and not record.adopted:
            note_crash(ctx, record, reason)
        reruns.runner_lost(ctx, record, reason)
        ctx.metrics.removed.labels(record.scale_set, record.provider, reason.value).inc()
        ctx.events.record(
            "runner",
            record.name,
            "removed",
            scale_set=record.scale_set,
            provider=record.provider,
            message=record.removal.describe(),
            reason=reason.value,
            **({"conclusion": conclusion.value} if conclusion else {}),
        )
        log.info(
            "runner.removing",
            reason=reason.value,
            conclusion=conclusion.value if conclusion else None,
            scale_set=record.scale_set,
            provider=record.provider,
            runner=record.name,
        )

    async def settle_leaving(self, record: RunnerRecord) -> bool:
        """Delete a leaving runner's machine; a failure is retried on the next pass.

        Nothing is asked of an unreachable provider: the machine keeps its place in the
        provider's limit until it lists again. At most ``MAX_PARALLEL_DELETES`` run at once."""
        ctx = self.ctx
        if record.provider not in ctx.providers or not ctx.fleet.is_reachable(record.provider):
            return False
        if not ctx.acting() or record.name in self._deleting:
            return False  # a standby; or already being deleted (a probe's and a pass's at once)
        self._deleting.add(record.name)
        try:
            # A runner that ended before it connected: its output, before its machine goes.
            await report_crash(ctx, record, ctx.providers[record.provider])
            async with self._slots:
                await ctx.delete_machine(record.provider, record.name, record.removal)
        except (ProviderUnavailable, TimeoutError) as e:
            # No answer: as a Create's or a List's silence, the provider is unreachable until
            # a List answers; nothing more is sent to it meanwhile.
            log.warning(
                "runner.delete_failed", runner=record.name, provider=record.provider, error=str(e)
            )
            if ctx.fleet.record_unanswered(record.provider):
                note_unanswered(ctx, record.provider, str(e) or "Delete got no answer")
            return False
        except ProviderError as e:
            log.warning(
                "runner.delete_failed", runner=record.name, provider=record.provider, error=str(e)
            )
            return False
        finally:
            self._deleting.discard(record.name)
        if ctx.runners.pop(record.name) is not None:
            self.rooms.opened(ctx.fleet.machine_deleted(record.provider, ctx.clock.now()))
        return True
