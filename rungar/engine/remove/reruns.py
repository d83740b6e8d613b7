"""Jobs lost with their machine, run again (docs/github.md, "Re-running jobs lost with their
machine").

When a busy runner's machine disappears (a spot reclaim, a host that dies), GitHub fails its
job. With ``rerun_lost_jobs`` on its scale set, Rungar re-runs such a job once through GitHub's
REST API (the job's re-run route). Only a job whose runner Rungar saw lost while it ran one
(the provider stopped listing its machine, or it was removed as stuck: busy and offline) is
re-run, and only when GitHub then reports it failed: a job that failed on its own, on a runner
that was there to report it, is never re-run, and no job is re-run twice.

Both records, the jobs lost and the jobs re-run, are written to the state database as they are
made and read back at start (:func:`restore`), so a restart between a job's loss and its
conclusion still re-runs it, and a restart between a re-run and the loss of that attempt does
not re-run it again. They are kept for ``timing.rerun_memory`` (30 days, GitHub's window for
re-running a run) and pruned at most once an hour. A re-run whose record cannot be written is
not made: at most once, even across restarts.
"""

from __future__ import annotations

import structlog

from rungar.engine.core.context import EngineContext, LostJob
from rungar.engine.core.records import RunnerRecord
from rungar.errors import GitHubError, StateError
from rungar.model.machine import Conclusion
from rungar.model.runner import RemovalReason

log = structlog.get_logger("rungar.engine")

# Removals that mean the runner's machine went away under a job.
LOST = frozenset({RemovalReason.ENDED, RemovalReason.STUCK})

PRUNE_EVERY = 3600.0  # seconds between two prunes of the records


def restore(ctx: EngineContext) -> None:
    """Read back the jobs lost and the jobs re-run the state database remembers."""
    book = ctx.findings.reruns
    since = ctx.clock.now() - ctx.config.timing.rerun_memory
    book.lost = {job_id: LostJob(*row) for job_id, row in ctx.store.lost_jobs(since).items()}
    book.rerun = ctx.store.reruns(since)


def _prune(ctx: EngineContext, now: float) -> None:
    book = ctx.findings.reruns
    if now - book.pruned_at < PRUNE_EVERY:
        return
    book.pruned_at = now
    try:
        ctx.store.prune_reruns(now - ctx.config.timing.rerun_memory)
    except StateError as e:
        log.warning("job.reruns_not_pruned", error=str(e))


def runner_lost(ctx: EngineContext, record: RunnerRecord, reason: RemovalReason) -> None:
    """A runner goes: remember its job when its machine went away under it."""
    hint = record.hint
    if reason not in LOST or hint is None or not hint.job_id:
        return
    state = ctx.sets.get(record.scale_set)
    if state is None or not state.config.rerun_lost_jobs:
        return
    lost = LostJob(record.scale_set, record.name, hint.repository, hint.run_id, hint.job)
    ctx.findings.reruns.lost[hint.job_id] = lost
    now = ctx.clock.now()
    try:
        ctx.store.keep_lost_job(
            hint.job_id, (lost.scale_set, lost.runner, lost.repository, lost.run_id, lost.job), now
        )
    except StateError as e:  # remembered until a restart only
        log.warning("job.lost_not_recorded", scale_set=lost.scale_set, error=str(e))
    _prune(ctx, now)


def job_completed(
    ctx: EngineContext, job_id: str, runner: str, conclusion: Conclusion | None
) -> None:
    """GitHub concluded a job: re-run it when it failed because its runner was lost."""
    book = ctx.findings.reruns
    lost = book.lost.pop(job_id, None)
    if lost is None:
        return
    try:
        ctx.store.forget_lost_job(job_id)
    except StateError as e:  # pruned with age
        log.warning("job.lost_not_forgotten", scale_set=lost.scale_set, error=str(e))
    if conclusion is not Conclusion.FAILED:
        return
    if runner and runner != lost.runner:
        return  # it ran again elsewhere since: that runner's failure is its own
    key = (lost.repository, lost.run_id, lost.job)
    if key in book.rerun:
        log.info("job.not_rerun_twice", scale_set=lost.scale_set, job_id=job_id)
        return
    book.rerun.add(key)
    try:
        ctx.store.record_rerun(*key, ctx.clock.now())
    except StateError as e:
        # Unrecorded, a restart could re-run it again: at most once wins over once.
        log.warning("job.not_rerun", scale_set=lost.scale_set, job_id=job_id, error=str(e))
        return
    ctx.spawn(_rerun(ctx, job_id, lost))


async def _rerun(ctx: EngineContext, job_id: str, lost: LostJob) -> None:
    try:
        rerun_id = await ctx.github.rerun_failed_job(lost.repository, lost.run_id, lost.runner)
    except GitHubError as e:
        ctx.metrics.jobs_rerun.labels(lost.scale_set, "error").inc()
        log.warning("job.rerun_failed", scale_set=lost.scale_set, job_id=job_id, error=str(e))
        return
    ctx.metrics.jobs_rerun.labels(lost.scale_set, "rerun").inc()
    sentence = (
        f"re-ran {lost.job or 'a job'} of {lost.repository}: its runner {lost.runner} "
        "was lost with its machine"
    )
    book = ctx.findings.reruns
    book.last, book.done = sentence, book.done + 1
    ctx.events.record(
        "scale_set",
        lost.scale_set,
        "job_rerun",
        scale_set=lost.scale_set,
        message=sentence,
        job_id=job_id,
        github_job_id=rerun_id,
        runner=lost.runner,
    )
    log.info("job.rerun", scale_set=lost.scale_set, job_id=job_id, runner=lost.runner)
