"""Scaling a scale set: the pure step (:func:`rungar.scaling.step.plan_scale`) decides from
a snapshot how many runners to create, which refill the idle reserve and which idle ones go;
this carries the plan out, all in one synchronous step under the scale set's lock, so two
steps never decide on the same snapshot: each create goes to :class:`Creations`, each idle
runner that goes to :class:`Removals`."""

from __future__ import annotations

from rungar.engine.core.context import EngineContext
from rungar.engine.core.notices import note_minimum, note_statistics
from rungar.engine.create.creating import Creations
from rungar.engine.jobs.job_history import JobHistory
from rungar.engine.remove.removing import Removals
from rungar.model.runner import RemovalReason, RunnerState
from rungar.scaling import desired
from rungar.scaling.stale_statistics import StatisticsCheck, judge
from rungar.scaling.step import plan_scale


class Scaler:
    def __init__(
        self,
        ctx: EngineContext,
        creations: Creations,
        removals: Removals,
        job_history: JobHistory,
    ) -> None:
        self.ctx = ctx
        self.creations = creations
        self.removals = removals
        self.job_history = job_history

    async def scale(self, name: str) -> None:
        """Apply the scale set's last decision: create what is missing, remove idle surplus."""
        ctx = self.ctx
        state = ctx.sets.get(name)
        if state is None or not ctx.may_create():
            return
        async with state.lock:
            now = ctx.clock.now()
            state.warm = self.job_history.warm(state.config, now)
            warm = state.warm.runners if state.warm else 0
            live = ctx.runners.live(name)
            judged = judge(
                state.statistics.check if state.statistics else StatisticsCheck(),
                reported=state.assigned,
                known=len(state.queued) + sum(1 for r in live if r.state is RunnerState.BUSY),
                idle=sum(1 for r in live if r.state is RunnerState.IDLE),
                now=now,
                after=ctx.config.timing.stale_statistics_after,
            )
            note_statistics(ctx, state, judged)
            decision = desired(
                state.config, judged.counted, paused=state.paused, now=now, warm=warm
            )
            note_minimum(ctx, state, decision.minimum)
            plan = plan_scale(
                decision,
                removed=state.removed,
                live=[r.view() for r in live],
                creating=ctx.runners.creating.count(name),
                revisions=ctx.revisions(name),
            )
            state.desired = plan.target
            state.reserve = plan.reserve
            state.warm_runners = plan.warm
            ctx.metrics.runners_desired.labels(name).set(plan.target)
            ctx.metrics.runners_warm.labels(name).set(plan.warm)
            for reserve in plan.create:
                ctx.runners.creating.ask(name)
                ctx.spawn(self.creations.create_one(state, reserve=reserve))
            for runner in plan.remove:
                record = ctx.runners.get(runner)
                if record is not None:
                    ctx.spawn(self.removals.remove(record, RemovalReason.SCALED_DOWN))
