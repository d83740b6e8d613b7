"""Why a job waits, told on GitHub: the thin task that carries out
:func:`rungar.engine.jobs.reason_plan.plan_reasons` (docs/github.md, "Why a job waits, on
GitHub").

Each turn takes a snapshot (the jobs waiting, each scale set's reason, the notices on GitHub,
the calls spent), asks the plan, and makes its calls one after the other. It is background
work: a registration never waits for it (the registrations keep their own queue and pace), a
call that fails is logged and tried again at a later turn, within the same share of the
budget (a failed call counts, as GitHub counts it). Only the daemon that acts writes.
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
from rungar.errors import GitHubError
from rungar.model.runner import RunnerState

log = structlog.get_logger("rungar.engine")


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

    def snapshot(self, now: float) -> ReasonSnapshot:
        ctx = self.ctx
        waiting: list[WaitingJob] = []
        reasons: dict[str, str] = {}
        starting: dict[str, set[str]] = {}
        for record in ctx.runners:
            if record.state is RunnerState.STARTING and not record.job_id:
                starting.setdefault(record.scale_set, set()).add(record.provider)
        for name, state in ctx.sets.items():
            for job_id, hint in state.queued.items():
                at = state.assigned_at.get(job_id)
                if at is None or not hint.repository or not hint.run_id:
                    continue
                waiting.append(
                    WaitingJob(job_id, NoticeKey(hint.repository, hint.run_id, name), at)
                )
            if state.queued:
                reasons[name] = scale_set_reason(ctx.fleet, name, now, starting.get(name, ()))
        unservable: dict[str, Unservable] = {}
        for name in ctx.fleet.providers:
            if ctx.fleet.is_reachable(name):
                self.silent_since.pop(name, None)
            else:
                self.silent_since.setdefault(name, now)
        for name, state in ctx.sets.items():
            after = state.config.unservable_cancel_after
            if after is not None and state.queued:
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
        plan = plan_reasons(self.snapshot(now), now)
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
        self._forget_heads()
        return plan

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
            self.seen.concluded += 1
            return
        now = ctx.clock.now()
        self.notices[key] = Notice(key, check_run_id, now, write.reason, write.since)
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
