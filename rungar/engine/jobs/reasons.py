"""Why a job waits, told on GitHub: the thin task that carries out
:func:`rungar.engine.jobs.reason_plan.plan_reasons` (docs/github.md, "Why a job waits, on
GitHub").

Each turn takes a snapshot (the jobs waiting, each scale set's reason, the notices on GitHub,
the calls spent), asks the plan, and makes its calls one after the other. It is background
work: a registration never waits for it (the registrations keep their own queue and pace), a
call that fails is logged and tried again at a later turn, within the same share of the
budget (a failed call counts, as GitHub counts it). Only the daemon that acts writes.

The notices standing on GitHub and the jobs waiting under them are kept in the state database
(:mod:`rungar.store.notices`): a restarted daemon goes on updating the same check run, and
counts those jobs as waiting until it hears them started or ended, or its scale set's
statistics say no job is assigned to it any more.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass

import structlog

from rungar.engine.core.context import EngineContext
from rungar.engine.jobs.reason_plan import (
    HOUR,
    Notice,
    NoticeKey,
    ReasonPlan,
    ReasonSnapshot,
    Unservable,
    WaitingJob,
    Write,
    plan_reasons,
    scale_set_reason,
    turn_every,
    unservable_of,
)
from rungar.errors import GitHubError, StateError
from rungar.model.runner import RunnerState
from rungar.store.notices import KeptJob, KeptNotice, NoticeBook

log = structlog.get_logger("rungar.engine")

# GitHub ends a job that has waited this long for a runner: a job kept from before a restart
# and never heard of since is not counted as waiting past it.
GITHUB_QUEUE_LIMIT = 24 * HOUR


@dataclass(slots=True)
class ReasonsSeen:
    """What ``rungar status`` and tests read of the notices: how many of each kind were
    written, and the last error."""

    published: int = 0
    updated: int = 0
    concluded: int = 0
    deferred: int = 0
    failed: int = 0
    cancelled: int = 0
    last_error: str = ""


class JobReasons:
    def __init__(self, ctx: EngineContext) -> None:
        self.ctx = ctx
        self.notices: dict[NoticeKey, Notice] = {}
        self.heads: dict[tuple[str, str], str] = {}
        self.spent: deque[float] = deque()
        self.seen = ReasonsSeen()
        self.silent_since: dict[str, float] = {}  # provider -> first seen not answering
        self.cancelled: dict[tuple[str, str], float] = {}  # run -> when it was cancelled
        self.book = NoticeBook(ctx.store)
        # Jobs waiting under a notice when the daemon before this one stopped, by job id: they
        # wait until heard started or ended (this daemon did not hear them assigned).
        self.carried: dict[str, WaitingJob] = {}
        self.loaded_at = ctx.clock.now()
        self._kept_jobs: frozenset[KeptJob] = frozenset()
        self._waiting: tuple[WaitingJob, ...] = ()  # this turn's
        self._load()

    def _load(self) -> None:
        try:
            notices, jobs = self.book.notices(), self.book.jobs()
        except StateError as e:
            log.warning("job.reasons_not_loaded", error=str(e))
            return
        for kept in notices:
            key = NoticeKey(kept.repository, kept.run_id, kept.scale_set)
            self.notices[key] = Notice(
                key, kept.check_run_id, kept.written_at, kept.reason, kept.since
            )
            if kept.head_sha:
                self.heads[key.run] = kept.head_sha
        for job in jobs:
            key = NoticeKey(job.repository, job.run_id, job.scale_set)
            if key in self.notices:
                self.carried[job.job_id] = WaitingJob(job.job_id, key, job.assigned_at)
        self._kept_jobs = frozenset(jobs)

    def job_left(self, job_id: str) -> None:
        """GitHub says the job started or ended: a job kept from before a restart waits no
        more (one heard assigned leaves its scale set's queue on its own)."""
        self.carried.pop(job_id, None)

    def snapshot(self, now: float) -> ReasonSnapshot:
        ctx = self.ctx
        waiting: list[WaitingJob] = []
        reasons: dict[str, str] = {}
        starting: dict[str, set[str]] = {}
        for record in ctx.runners:
            if record.state is RunnerState.STARTING and not record.job_id:
                starting.setdefault(record.scale_set, set()).add(record.provider)
        self._forget_carried(now)
        for name, state in ctx.sets.items():
            for job_id, hint in state.queued.items():
                at = state.assigned_at.get(job_id)
                if at is None or not hint.repository or not hint.run_id:
                    continue
                carried = self.carried.get(job_id)
                if carried is not None:  # heard assigned again: it waits since the first time
                    at = min(at, carried.assigned_at)
                waiting.append(
                    WaitingJob(job_id, NoticeKey(hint.repository, hint.run_id, name), at)
                )
        heard = {job.job_id for job in waiting}
        waiting.extend(job for job in self.carried.values() if job.job_id not in heard)
        for name in sorted({job.key.scale_set for job in waiting}):
            reasons[name] = scale_set_reason(ctx.fleet, name, now, starting.get(name, ()))
        unservable: dict[str, Unservable] = {}  # of the scale sets with a job waiting
        for name in ctx.fleet.providers:
            if ctx.fleet.is_reachable(name):
                self.silent_since.pop(name, None)
            else:
                self.silent_since.setdefault(name, now)
        for name, state in ctx.sets.items():
            after = state.config.unservable_cancel_after
            if after is not None and name in reasons:
                never = unservable_of(
                    ctx.fleet, name, after, self.silent_since, ctx.findings.list_errors
                )
                if never is not None:
                    unservable[name] = never
        for run in [run for run, at in self.cancelled.items() if now - at >= HOUR]:
            del self.cancelled[run]
        for key, notice in self.notices.items():
            if key.scale_set not in reasons:
                reasons[key.scale_set] = notice.reason
        while self.spent and now - self.spent[0] >= HOUR:
            self.spent.popleft()
        budget = ctx.github.budget()
        return ReasonSnapshot(
            waiting=tuple(waiting),
            reasons=reasons,
            notices=dict(self.notices),
            heads=dict(self.heads),
            spent=tuple(self.spent),
            budget_limit=budget.limit,
            check_runs=ctx.github.writes_check_runs(),
            settings=ctx.config.job_reasons,
            unservable=unservable,
            cancelled=frozenset(self.cancelled),
        )

    async def turn(self) -> ReasonPlan:
        """One turn: the plan for now, carried out."""
        ctx = self.ctx
        if not self.wanted() or not ctx.acting():
            return ReasonPlan()
        now = ctx.clock.now()
        snapshot = self.snapshot(now)
        self._waiting = snapshot.waiting
        plan = plan_reasons(snapshot, now)
        self.seen.deferred += plan.deferred
        for head in plan.heads:
            self.spent.append(ctx.clock.now())
            try:
                sha = await ctx.github.head_commit(head.repository, head.run_id)
            except GitHubError as e:
                self._failed("head", head.repository, head.run_id, e)
                continue
            self.heads[(head.repository, head.run_id)] = sha
        for cancel in plan.cancels:
            await self._cancel(cancel.write)
        for write in plan.writes:
            await self._write(write)
        self._keep_jobs(snapshot.waiting)
        self._forget_heads()
        return plan

    def _forget_carried(self, now: float) -> None:
        """A kept job waits no more once its scale set is gone, its scale set's statistics
        (polled since this daemon started) count no job assigned, or GitHub would have ended
        it."""
        for job_id, job in list(self.carried.items()):
            state = self.ctx.sets.get(job.key.scale_set)
            if (
                state is None
                or (state.polled_at > self.loaded_at and state.assigned == 0)
                or now - job.assigned_at >= GITHUB_QUEUE_LIMIT
            ):
                del self.carried[job_id]

    def _keep_jobs(self, waiting: tuple[WaitingJob, ...]) -> None:
        """The jobs waiting under a notice, in the state database when they changed."""
        jobs = frozenset(
            KeptJob(j.job_id, j.key.repository, j.key.run_id, j.key.scale_set, j.assigned_at)
            for j in waiting
            if j.key in self.notices
        )
        if jobs == self._kept_jobs:
            return
        try:
            self.book.keep_jobs(jobs)
        except StateError as e:
            log.warning("job.reasons_not_kept", error=str(e))
            return
        self._kept_jobs = jobs

    def _keep_notice(self, notice: Notice | None, key: NoticeKey) -> None:
        """A notice written (``notice``) or concluded (None), in the state database."""
        try:
            if notice is None:
                self.book.forget(key.repository, key.run_id, key.scale_set)
            else:
                self.book.keep(
                    KeptNotice(
                        key.repository,
                        key.run_id,
                        key.scale_set,
                        notice.check_run_id,
                        self.heads.get(key.run, ""),
                        notice.written_at,
                        notice.reason,
                        notice.since,
                    )
                )
        except StateError as e:
            log.warning("job.reasons_not_kept", error=str(e))

    def wanted(self) -> bool:
        """Reasons are told, or a scale set ends jobs that can never be served."""
        ctx = self.ctx
        return ctx.config.job_reasons.enabled or any(
            s.config.unservable_cancel_after is not None for s in ctx.sets.values()
        )

    async def _cancel(self, write: Write) -> None:
        """A run whose job can never be served: cancelled, with an event, a metric and the
        reason on its notice."""
        ctx = self.ctx
        key = write.key
        self.spent.append(ctx.clock.now())
        try:
            await ctx.github.cancel_workflow_run(key.repository, key.run_id)
        except GitHubError as e:
            self._failed("cancel", key.repository, key.run_id, e)
            return
        self.cancelled[key.run] = ctx.clock.now()
        self.seen.cancelled += 1
        ctx.metrics.runs_cancelled.labels(key.scale_set).inc()
        ctx.events.record(
            "scale_set",
            key.scale_set,
            "run_cancelled",
            scale_set=key.scale_set,
            message=write.reason,
            repository=key.repository,
            run_id=key.run_id,
        )
        log.warning(
            "job.run_cancelled",
            scale_set=key.scale_set,
            repository=key.repository,
            run_id=key.run_id,
            reason=write.reason,
        )
        if key.run not in self.heads:
            self.spent.append(ctx.clock.now())
            try:
                self.heads[key.run] = await ctx.github.head_commit(key.repository, key.run_id)
            except GitHubError as e:
                self._failed("head", key.repository, key.run_id, e)
                return
        await self._write(write)

    async def _write(self, write: Write) -> None:
        ctx = self.ctx
        key = write.key
        known = self.notices.get(key)
        self.spent.append(ctx.clock.now())
        try:
            if ctx.github.writes_check_runs():
                body = dict(write.body)
                body["head_sha"] = body.get("head_sha") or self.heads.get(key.run, "")
                if known and not body["head_sha"]:
                    del body["head_sha"]  # an update keeps the commit it was written on
                check_run_id = await ctx.github.write_check_run(
                    key.repository, known.check_run_id if known else 0, body
                )
            else:
                sha = self.heads.get(key.run, "")
                await ctx.github.write_commit_status(key.repository, sha, write.body)
                check_run_id = 0
        except GitHubError as e:
            self._failed(write.kind, key.repository, key.run_id, e)
            return
        ctx.metrics.job_reasons_written.labels(key.scale_set, write.kind).inc()
        if write.kind in ("conclude", "fail"):
            self.notices.pop(key, None)
            self._keep_notice(None, key)
            self.seen.concluded += 1
            return
        now = ctx.clock.now()
        self.notices[key] = Notice(key, check_run_id, now, write.reason, write.since)
        self._keep_notice(self.notices[key], key)
        self._keep_jobs(self._waiting)  # with it: a restart right after finds them both
        if write.kind == "publish":
            self.seen.published += 1
            log.info(
                "job.reason_published",
                scale_set=key.scale_set,
                repository=key.repository,
                run_id=key.run_id,
                reason=write.reason,
            )
        else:
            self.seen.updated += 1

    def _failed(self, kind: str, repository: str, run_id: str, error: GitHubError) -> None:
        self.seen.failed += 1
        self.seen.last_error = str(error)
        log.warning(
            "job.reason_not_written",
            kind=kind,
            repository=repository,
            run_id=run_id,
            error=str(error),
        )

    def _forget_heads(self) -> None:
        """A run's head is kept while one of its jobs waits or its notice stands."""
        wanted = {key.run for key in self.notices}
        wanted.update(job.key.run for job in self.carried.values())
        for state in self.ctx.sets.values():
            wanted.update((h.repository, h.run_id) for h in state.queued.values())
        for run in [run for run in self.heads if run not in wanted]:
            del self.heads[run]

    def pace(self) -> float:
        return turn_every(self.ctx.config.job_reasons)

    async def forever(self) -> None:
        while True:
            await self.ctx.clock.sleep(self.pace())
            try:
                await self.turn()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("job.reasons_failed")
