"""Scaling a scale set: the pure step (:func:`rungar.scaling.step.plan_scale`) decides from
a snapshot how many runners to create, which refill the idle reserve and which idle ones go;
this carries the plan out, all in one synchronous step under the scale set's lock, so two
steps never decide on the same snapshot."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rungar.engine.notices import note_minimum
from rungar.model.runner import RemovalReason
from rungar.scaling import desired
from rungar.scaling.step import plan_scale

if TYPE_CHECKING:
    from rungar.engine.engine import Engine


class Scaler:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    async def scale(self, name: str) -> None:
        """Apply the scale set's last decision: create what is missing, remove idle surplus."""
        engine = self.engine
        state = engine.sets.get(name)
        if state is None or not engine.may_create():
            return
        async with state.lock:
            now = engine.clock.now()
            state.warm = engine.job_history.warm(state.config, now)
            warm = state.warm.runners if state.warm else 0
            decision = desired(
                state.config, state.assigned, paused=state.paused, now=now, warm=warm
            )
            note_minimum(engine, state, decision.minimum)
            plan = plan_scale(
                decision,
                removed=state.removed,
                live=[r.view() for r in engine.runners.live(name)],
                creating=engine.runners.creating.count(name),
                revisions=engine.current_revisions(name),
            )
            state.desired = plan.target
            state.reserve = plan.reserve
            state.warm_runners = plan.warm
            engine.metrics.runners_desired.labels(name).set(plan.target)
            engine.metrics.runners_warm.labels(name).set(plan.warm)
            for reserve in plan.create:
                engine.runners.creating.ask(name)
                engine.spawn(engine.creations.create_one(state, reserve=reserve))
            for runner in plan.remove:
                record = engine.runners.get(runner)
                if record is not None:
                    engine.spawn(engine.removals.remove(record, RemovalReason.SCALED_DOWN))
