"""Jobs lost with their machine, run again (docs/github.md, "Re-running jobs lost with their
machine").

When a busy runner's machine disappears (a spot reclaim, a host that dies), GitHub fails its
job. With ``rerun_lost_jobs`` on its scale set, Rungar re-runs such a job once through GitHub's
REST API (the job's re-run route). Only a job whose runner Rungar saw lost while it ran one
(the provider stopped listing its machine, or it was removed as stuck: busy and offline) is
re-run, and only when GitHub then reports it failed: a job that failed on its own, on a runner
that was there to report it, is never re-run, and no job is re-run twice.
"""

from __future__ import annotations

import structlog

from rungar.engine.context import EngineContext, LostJob
from rungar.engine.records import RunnerRecord
from rungar.errors import GitHubError
from rungar.model.machine import Conclusion
from rungar.model.runner import RemovalReason

log = structlog.get_logger("rungar.engine")

# Removals that mean the runner's machine went away under a job.
LOST = frozenset({RemovalReason.ENDED, RemovalReason.STUCK})


def runner_lost(ctx: EngineContext, record: RunnerRecord, reason: RemovalReason) -> None:
    """A runner goes: remember its job when its machine went away under it."""
    hint = record.hint
    if reason not in LOST or hint is None or not hint.job_id:
        return
    state = ctx.sets.get(record.scale_set)
    if state is None or not state.config.rerun_lost_jobs:
        return
    ctx.findings.reruns.lost[hint.job_id] = LostJob(
        record.scale_set, record.name, hint.repository, hint.run_id, hint.job
    )


def job_completed(
    ctx: EngineContext, job_id: str, runner: str, conclusion: Conclusion | None
) -> None:
    """GitHub concluded a job: re-run it when it failed because its runner was lost."""
    book = ctx.findings.reruns
    lost = book.lost.pop(job_id, None)
    if lost is None or conclusion is not Conclusion.FAILED:
        return
    if runner and runner != lost.runner:
        return  # it ran again elsewhere since: that runner's failure is its own
    key = (lost.repository, lost.run_id, lost.job)
    if key in book.rerun:
        log.info("job.not_rerun_twice", scale_set=lost.scale_set, job_id=job_id)
        return
    book.rerun.add(key)
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
