"""Job bookkeeping: what GitHub says of a scale set's jobs, and what follows for its runners.

The assigned count (``on_demand``) is the scale set's demand, applied by the scaling step; a
job assigned is queued with its hint (the next Creates carry them) and remembered for the warm
pool; a job started makes its runner busy, measures the wait and tells the provider which job
it runs; a job completed lets its ephemeral runner go, with the job's conclusion.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace

from rungar.engine.core.context import EngineContext
from rungar.engine.core.notices import note_connected
from rungar.engine.core.records import RunnerRecord
from rungar.engine.core.scale_set_state import ScaleSetState
from rungar.engine.jobs.job_history import JobHistory
from rungar.engine.jobs.scaler import Scaler
from rungar.engine.remove import reruns
from rungar.engine.remove.removing import Removals
from rungar.errors import RungarError
from rungar.github.interface import JobTimes
from rungar.model.machine import Conclusion, JobHint
from rungar.model.provider import Provider
from rungar.model.runner import GitHubState, RemovalReason, RunnerState
from rungar.stopping import within


def _job_times(times: JobTimes | None, waited: float | None) -> dict[str, float]:
    """A job_started event's times: GitHub's (epoch seconds) where it sent them, and the wait."""
    out: dict[str, float] = {}
    if times is not None:
        for key, value in (("queued_at", times.queued), ("assigned_at", times.assigned)):
            if value > 0:
                out[key] = value
    if waited is not None:
        out["waited_s"] = round(waited, 1)
    return out


class JobBook:
    def __init__(
        self, ctx: EngineContext, scaler: Scaler, removals: Removals, job_history: JobHistory
    ) -> None:
        self.ctx = ctx
        self.scaler = scaler
        self.removals = removals
        self.job_history = job_history
        # (provider, scale set) with a queue update in flight, and those asked again meanwhile
        self._queue_calls: set[tuple[str, str]] = set()
        self._queue_again: set[tuple[str, str]] = set()

    def on_demand(self, name: str, assigned: int) -> None:
        ctx = self.ctx
        state = ctx.sets.get(name)
        if state is None:
            return
        state.assigned = assigned
        state.polled_at = ctx.clock.now()
        ctx.metrics.jobs_assigned.labels(name).set(assigned)
        ctx.metrics.last_poll.labels(name).set(state.polled_at)
        ctx.spawn(self.scaler.scale(name))

    def on_job_assigned(self, name: str, job_id: str, hint: JobHint, at: float = 0.0) -> None:
        """``at``: when GitHub assigned it (0: now); warm pools predict from these times."""
        ctx = self.ctx
        state = ctx.sets.get(name)
        if state is not None:
            state.queued[job_id] = hint
            state.assigned_at.setdefault(job_id, ctx.clock.now())
            self.job_history.record(name, job_id, at or ctx.clock.now())
            self.tell_queues(name)

    def tell_queues(self, name: str) -> None:
        """A job queued for scale set ``name``: each provider holding one of its runners that
        has not taken a job yet hears the queue now (UpdateRunner without a job), even when
        the next Create goes elsewhere, so a runner reserved for lighter jobs is re-reserved.

        A call carries the queue's first ``QUEUE_HINTS`` jobs; a provider already told those
        very jobs, none of which has left the queue since, is not told them again: a burst
        queues thousands of jobs behind the same first ones. Its runners created since were
        created with those hints too (the front only grew, or stayed, meanwhile).
        """
        ctx = self.ctx
        state = ctx.sets.get(name)
        if state is None:
            return
        waiting = ctx.runners.first_on_each_provider(name, _without_a_job)
        if not waiting:
            return
        front = state.queue_front()
        for provider_name, runner in waiting.items():
            if state.queue_told.get(provider_name) == front:
                continue  # it knows this queue already
            key = (provider_name, name)
            if key in self._queue_calls:
                self._queue_again.add(key)  # the call in flight is followed by the latest queue
                continue
            provider = ctx.providers.get(provider_name)
            if getattr(provider, "queue_changed", None) is None:
                continue  # a provider that does not follow queues
            self._queue_calls.add(key)
            ctx.spawn(self._tell_queue(provider_name, name, runner))

    def tell_refusers(self, name: str, job_id: str) -> None:
        """``job_id`` left scale set ``name``'s queue. A provider that refused a create listing
        it keeps a queue entry while those jobs wait: it hears the queue now (UpdateRunner
        without a job, naming the runner it refused), so its entry ends as soon as nothing it
        was refused for waits, whichever provider ran them (docs/runnerd.md)."""
        ctx = self.ctx
        state = ctx.sets.get(name)
        if state is None or not state.refused_by:
            return
        for provider_name, (runner, listed) in list(state.refused_by.items()):
            if job_id not in listed:
                continue
            listed.discard(job_id)
            if not listed:
                del state.refused_by[provider_name]
            if getattr(ctx.providers.get(provider_name), "queue_changed", None) is None:
                continue  # a provider that does not follow queues
            key = (provider_name, name)
            if key in self._queue_calls:
                self._queue_again.add(key)  # the call in flight is followed by the latest queue
                continue
            self._queue_calls.add(key)
            ctx.spawn(self._tell_queue(provider_name, name, runner))

    async def _tell_queue(self, provider_name: str, name: str, runner: str) -> None:
        ctx = self.ctx
        key = (provider_name, name)
        try:
            while True:
                self._queue_again.discard(key)
                state = ctx.sets.get(name)
                provider = ctx.providers.get(provider_name)
                follow = getattr(provider, "queue_changed", None)
                if state is None or follow is None:
                    return
                queued = state.queue_front()
                if state.queue_told.get(provider_name) != queued:
                    with contextlib.suppress(RungarError, TimeoutError):
                        await within(follow(runner, queued), ctx.call_timeout(provider_name))
                        state.queue_told[provider_name] = queued  # only once it answered
                if key not in self._queue_again:
                    return
        finally:
            self._queue_calls.discard(key)

    def mark_connected(self, record: RunnerRecord) -> None:
        """The runner was seen on GitHub for the first time: its boot is over."""
        ctx = self.ctx
        if record.connected:
            return
        record.connected = True
        note_connected(ctx, record)
        if record.created_at and not record.adopted:
            boot = max(0.0, ctx.clock.now() - record.created_at)
            ctx.fleet.record_start(record.provider, boot)  # its typical start (host waits)
            ctx.metrics.boot_duration.labels(record.scale_set, record.provider).observe(boot)
            ctx.events.record(
                "runner",
                record.name,
                "connected",
                scale_set=record.scale_set,
                provider=record.provider,
                boot_duration=round(boot, 1),
            )

    def on_job_started(
        self, name: str, job_id: str, runner: str, hint: JobHint, times: JobTimes | None = None
    ) -> None:
        """The job's wait is on Rungar's clock, as runner lives are (docs/configuration.md, "a
        job's wait"): from when this daemon heard it assigned until now. ``times`` are GitHub's:
        its assign and runner-assign times give the wait only for a job whose assignment this
        daemon did not hear (assigned before it started)."""
        ctx = self.ctx
        state = ctx.sets.get(name)
        record = ctx.runners.get(runner)
        github_wait = times.runner_wait if times is not None else None
        waited: float | None = None
        if state is not None:
            was_queued = _left_queue(state, job_id)
            self.tell_refusers(name, job_id)
            if was_queued is not None and not hint.queued_at and was_queued.queued_at:
                hint = replace(hint, queued_at=was_queued.queued_at)
            if was_queued is not None and was_queued.clock_offset is not None:
                # The offset measured as the job queued converts its queue time; one measured
                # now would move it by however fast GitHub's clock ran meanwhile.
                hint = replace(hint, clock_offset=was_queued.clock_offset)
            assigned_at = state.assigned_at.pop(job_id, None)
            if assigned_at is not None:
                waited = max(0.0, ctx.clock.now() - assigned_at)
            elif github_wait is not None:
                waited = github_wait
            if waited is not None:
                ctx.metrics.job_runner_wait.labels(name).observe(waited)
            ctx.metrics.jobs_started.labels(name).inc()
        if record is not None and record.state is not RunnerState.LEAVING:
            self.mark_connected(record)
            record.state = RunnerState.BUSY
            record.github = GitHubState.BUSY
            record.job = f"{hint.repository}: {hint.job}" if hint.repository else hint.job
            record.job_id = job_id
            record.hint = replace(hint, job_id=job_id)
            ctx.events.record(
                "runner",
                runner,
                "job_started",
                scale_set=name,
                provider=record.provider,
                message=record.job,
                job_id=job_id,
                repository=hint.repository,
                **_job_times(times, waited),
            )
            provider = ctx.providers.get(record.provider)
            if provider is not None:
                told = replace(hint, job_id=job_id)
                ctx.spawn(self._tell_provider(record.provider, provider, runner, told))

    async def _tell_provider(
        self, name: str, provider: Provider, runner: str, hint: JobHint
    ) -> None:
        ctx = self.ctx
        timeout = ctx.call_timeout(name)
        with contextlib.suppress(RungarError, TimeoutError):
            await within(provider.update_runner(runner, hint), timeout, "UpdateRunner")

    def on_job_completed(
        self,
        name: str,
        job_id: str,
        runner: str,
        conclusion: Conclusion | None,
        hint: JobHint | None = None,
    ) -> None:
        """GitHub reported the job completed: its runner goes, and its provider learns how the
        job ended (``conclusion``, already in Rungar's vocabulary; None when GitHub's word is
        not one Rungar knows)."""
        ctx = self.ctx
        ctx.metrics.jobs_completed.labels(name, conclusion.value if conclusion else "unknown").inc()
        state = ctx.sets.get(name)
        if state is not None:
            _left_queue(state, job_id)
            self.tell_refusers(name, job_id)
            state.assigned_at.pop(job_id, None)
        reruns.job_completed(ctx, job_id, runner, conclusion)
        record = ctx.runners.get(runner)
        if record is None or record.state is RunnerState.LEAVING:
            return
        if record.hint is None and hint is not None and (hint.job or hint.repository):
            record.hint = replace(hint, job_id=job_id)  # its start was missed
        elif record.hint is not None and hint is not None and hint.completed_at > 0:
            # GitHub's completion time goes to the provider with the Delete's removal.
            record.hint = replace(
                record.hint,
                completed_at=hint.completed_at,
                queued_at=record.hint.queued_at or hint.queued_at,
                started_at=record.hint.started_at or hint.started_at,
            )
        # An ephemeral runner takes one job; GitHub removes its registration itself.
        self.removals.let_go(record, RemovalReason.JOB_COMPLETED, conclusion)
        ctx.spawn(self.removals.settle_leaving(record))


def _left_queue(state: ScaleSetState, job_id: str) -> JobHint | None:
    """``job_id`` leaves the scale set's queue; a provider told a front holding it is told
    the next front, even one equal to what it was told before (the job queued again): its
    runners created meanwhile were not created with that job among their hints."""
    hint = state.queued.pop(job_id, None)
    if hint is not None and state.queue_told:
        for provider, told in list(state.queue_told.items()):
            if hint in told:
                del state.queue_told[provider]
    return hint


def _without_a_job(record: RunnerRecord) -> bool:
    """A runner that may still take one of its scale set's queued jobs."""
    return record.state in (RunnerState.STARTING, RunnerState.IDLE) and not record.job_id
