"""Per-repository accounting: each job Rungar served becomes one row of the state database.

A job is *served* when one of Rungar's runners took it: its completion names the runner. Its
runner-seconds are that runner's life until the job ended (an ephemeral runner is created for
one job, and a cloud bills its boot too), or until it was let go when its machine went away
under the job; a runner Rungar does not know (its record lost) counts the job's own run time by
GitHub's clock. A job lost with its machine is booked to the provider that held the machine:
its runner is gone by the time GitHub fails the job, so the record is found among those
recently dropped.

Both durations are on Rungar's clock, so they compare side by side (docs/usage.md, "Clocks"):
the wait runs from when the daemon heard GitHub assign the job to its scale set until it heard a
runner take it, the same moments ``rungar status`` and the job-wait metric use. GitHub's own
times give the wait only for a job whose assignment this daemon did not hear (assigned before it
started). The price is the provider's ``price_per_hour`` when the job ended, kept with the row,
so a later price change does not rewrite the past.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import structlog

from rungar.engine.core.context import EngineContext
from rungar.errors import StateError
from rungar.model.runner import RunnerState
from rungar.store.usage import UsageBook, read_usage
from rungar.usage.summary import UNKNOWN_CONCLUSION, JobUsage, summarize

if TYPE_CHECKING:
    from pathlib import Path

    from rungar.github.interface import JobEvent

log = structlog.get_logger("rungar.accounting")

MAX_REMEMBERED = 20_000  # waits of started jobs awaiting their completion, oldest forgotten


class Accounting:
    """Remembers each started job's wait, and records each served job when it completes."""

    def __init__(self, ctx: EngineContext) -> None:
        self.ctx = ctx
        self.book = UsageBook(ctx.store, ctx.config.usage_retention)
        self._waits: OrderedDict[str, float] = OrderedDict()

    def job_started(self, scale_set: str, event: JobEvent) -> None:
        """Before the engine forgets when the job was assigned (it pops it at the start)."""
        state = self.ctx.sets.get(scale_set)
        assigned_at = state.assigned_at.get(event.job_id) if state is not None else None
        if assigned_at is not None:  # heard assigned, and now started: Rungar's clock
            wait: float | None = max(0.0, self.ctx.clock.now() - assigned_at)
        else:
            wait = event.times.runner_wait
        if wait is None:
            return
        self._waits[event.job_id] = wait
        self._waits.move_to_end(event.job_id)
        while len(self._waits) > MAX_REMEMBERED:
            self._waits.popitem(last=False)

    def job_completed(self, scale_set: str, event: JobEvent) -> None:
        """Before the engine lets the runner go: its record says where it ran and since when."""
        row = self.row(scale_set, event)
        if row is None:
            return
        self.book.retention = self.ctx.config.usage_retention
        try:
            self.book.record(row, self.ctx.clock.now())
        except StateError as e:  # accounting must never stop a runner from being let go
            log.warning("usage.not_recorded", job_id=event.job_id, error=str(e))

    def row(self, scale_set: str, event: JobEvent) -> JobUsage | None:
        """The job's row, or None for a job no runner of Rungar's took."""
        wait = self._waits.pop(event.job_id, None)
        if wait is None:  # its start was not heard: GitHub's times are all there is
            wait = event.times.runner_wait
        if not event.runner_name:
            return None  # cancelled before any runner took it: not served
        ctx = self.ctx
        now = ctx.clock.now()
        record = ctx.runners.get(event.runner_name) or ctx.runners.gone(event.runner_name)
        if record is not None and record.created_at:
            # A runner let go (its machine gone under the job) stopped costing then.
            leaving = record.state is RunnerState.LEAVING and record.left_at
            seconds = max(0.0, (record.left_at if leaving else now) - record.created_at)
        elif event.times.finished > event.times.started > 0:
            seconds = event.times.finished - event.times.started
        else:
            seconds = 0.0
        provider = record.provider if record is not None else ""
        config = ctx.fleet.providers.get(provider)
        hint = event.hint
        return JobUsage(
            job_id=event.job_id,
            finished_at=now,
            repository=hint.repository,
            workflow=hint.workflow,
            job=hint.job,
            scale_set=scale_set,
            provider=provider,
            runner=event.runner_name,
            runner_seconds=round(seconds, 3),
            conclusion=event.conclusion.value if event.conclusion else UNKNOWN_CONCLUSION,
            wait=None if wait is None else round(wait, 3),
            price_per_hour=config.price_per_hour if config is not None else None,
        )


def usage_document(database: str | Path, by: str, since: float, now: float) -> dict[str, Any]:
    """What ``rungar usage`` and the fleet page's Usage tab show: the state database's rows
    since ``since``, summed by ``by``. Reads on a connection of its own: call it off the
    engine's loop."""
    return summarize(read_usage(database, since), by, since, now)
