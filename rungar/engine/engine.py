"""The engine: turns demand into runners through placement, and keeps the fleet honest.

Effectful shell around the pure decisions (placement, scaling). One event loop; every
provider and GitHub call is awaited without holding state locks, and every state change is
a synchronous step, so concurrent creates never overshoot a limit (claims are checked and
taken in one step). Creates for different runners run in parallel, bounded by a semaphore,
so a slow provider slows only its own runner.

Creating a runner: nothing is registered when no provider can be
tried; the runner is registered with GitHub once; its providers are tried in order; a refused
create's leftover is deleted; when no provider takes it its registration is removed; the whole
attempt is bounded by the scale set's ``start_timeout``. Each create's intent is written to the
store before any call, so a crash at any moment is settled by the next reconcile pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

import structlog

from rungar.clock import Clock, within
from rungar.config.model import ScaleSetConfig, ScaleSetsFile
from rungar.engine.acting import ActingGuard
from rungar.engine.events import EventLog
from rungar.engine.job_history import JobHistory
from rungar.engine.leftovers import Leftover
from rungar.engine.metrics import Metrics
from rungar.engine.naming import revision, runner_name
from rungar.engine.notices import note_connected, note_minimum
from rungar.engine.records import RunnerRecord, RunnerTable
from rungar.engine.removing import Removals
from rungar.engine.tasks import Tasks
from rungar.errors import GitHubError, ProviderError, RungarError
from rungar.github.interface import GitHub, JobTimes, RunnerStatus
from rungar.model import sentences
from rungar.model.create_intent import CreateIntent
from rungar.model.labels import machine_labels
from rungar.model.machine import (
    Conclusion,
    Created,
    CreateRequest,
    JobHint,
    Refusal,
    RefusalKind,
    Removal,
)
from rungar.model.provider import Provider
from rungar.model.runner import GitHubState, RemovalReason, RunnerState
from rungar.model.runner_block import RunnerBlock
from rungar.placement import Fleet
from rungar.placement.attempt import CreateBudget, NotPlaced, Outcome, Placed, Try, place
from rungar.scaling import InForce, Warm, desired
from rungar.scaling.step import plan_scale
from rungar.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from rungar.engine.lease import LeaseKeeper

log = structlog.get_logger("rungar.engine")
T = TypeVar("T")


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


@dataclass
class ScaleSetState:
    """What the engine knows of one scale set beyond its configuration."""

    config: ScaleSetConfig
    id: int = 0
    assigned: int = 0
    desired: int | None = None  # unknown until the first decision
    reserve: int = 0  # of desired, the runners kept idle beyond the assigned jobs
    minimum: InForce | None = None  # min_runners in force (schedule window) at the last decision
    warm: Warm | None = None  # the warm pool's prediction at the last decision
    warm_runners: int = 0  # of reserve, the warm pool's part (after max_runners)
    polled_at: float = 0.0  # when GitHub last told the assigned count (0 = never)
    paused_at_runtime: bool | None = None  # None: as configured
    _phase: str = "STARTING"  # STARTING, LISTENING, WAITING (the listener says), UNREACHABLE
    note: str = ""
    queued: dict[str, JobHint] = field(default_factory=dict)  # job id -> hint
    assigned_at: dict[str, float] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    removed: bool = False  # no longer configured: drains, then is forgotten
    watchers: list[Callable[[], None]] = field(default_factory=list, repr=False)

    @property
    def paused(self) -> bool:
        if self.paused_at_runtime is not None:
            return self.paused_at_runtime
        return self.config.paused

    @property
    def phase(self) -> str:
        return self._phase

    @phase.setter
    def phase(self, phase: str) -> None:
        """Every change is told to the watchers (readiness: sd_notify, ``/readyz``)."""
        changed = phase != self._phase
        self._phase = phase
        if changed:
            for watcher in self.watchers:
                watcher()


class Engine:
    def __init__(
        self,
        config: ScaleSetsFile,
        providers: Mapping[str, Provider],
        github: GitHub,
        *,
        clock: Clock,
        store: SqliteStore,
        events: EventLog,
        metrics: Metrics | None = None,
        installation: str = "gh-local",
        max_parallel_creates: int = 64,
    ) -> None:
        self.config = config
        self.providers = dict(providers)
        self.github = github
        self.clock = clock
        self.store = store
        self.events = events
        self.metrics = metrics or Metrics()
        self.installation = installation
        self.fleet = Fleet(config.providers, config.scale_sets, config.timing)
        self.runners = RunnerTable()
        # Told of every scale set's phase change; shared by the scale sets `rungar apply` adds.
        self.phase_watchers: list[Callable[[], None]] = []
        self.sets: dict[str, ScaleSetState] = {
            s.name: ScaleSetState(s, watchers=self.phase_watchers) for s in config.scale_sets
        }
        self.orphans_seen: dict[str, float] = {}
        # GitHub's last list of the installation's runners, and the leftover scale sets found
        # in it and on the providers (rungar.engine.leftovers).
        self.listed_runners: list[RunnerStatus] = []
        self.leftovers: list[Leftover] = []
        self.leftovers_reported: set[str] = set()
        self.draining_providers: set[str] = set()
        self.list_errors: dict[str, str] = {}  # why a provider is unreachable
        self.github_calls_exported: dict[str, int] = {}
        self.github_url = ""
        self._create_slots = asyncio.Semaphore(max_parallel_creates)
        self.removals = Removals(self)
        self.tasks = Tasks()
        self.started_at = clock.now()
        self.guard = ActingGuard()  # the lease, when there is one: whether this daemon acts
        backoffs, holds = store.load_placement()
        self.fleet.restore_state(backoffs, holds)
        self.fleet.restore_crash_loops(store.load_crash_loops())
        self.job_history = JobHistory(store, config.scale_sets, clock.now())

    # ------------------------------------------------------------------ helpers

    def spawn(self, coro: Coroutine[Any, Any, object]) -> asyncio.Task[object]:
        return self.tasks.spawn(coro)

    async def drain_tasks(self) -> None:
        """Wait for every create and removal in flight (tests and clean shutdowns)."""
        await self.tasks.drain()

    def runner_block(self, scale_set: str, provider: str) -> dict[str, object]:
        for entry in self.sets[scale_set].config.providers:
            if entry.name == provider:
                return dict(entry.runner)
        return {}

    def current_revisions(self, scale_set: str) -> dict[str, str]:
        return {
            entry.name: revision(entry.runner) for entry in self.sets[scale_set].config.providers
        }

    def save_placement(self) -> None:
        backoffs, holds = self.fleet.export_state()
        self.store.save_placement(backoffs, holds)
        self.store.save_crash_loops(self.fleet.export_crash_loops())

    def resync_fleet_counts(self) -> None:
        self.fleet.set_runners(self.runners.counts())
        leaving = self.runners.leaving_by_provider()
        for name in self.fleet.providers:
            self.fleet.set_leaving(name, leaving.get(name, 0))

    # ------------------------------------------------------------------ the lease

    @property
    def lease(self) -> LeaseKeeper | None:
        return self.guard.lease

    @lease.setter
    def lease(self, keeper: LeaseKeeper | None) -> None:
        self.guard.lease = keeper

    def acting(self) -> bool:
        return self.guard.acting()

    def may_create(self) -> bool:
        return self.guard.may_create()

    # ------------------------------------------------------------------ scaling

    async def scale(self, name: str) -> None:
        """Apply the scale set's last decision: create what is missing, remove idle surplus."""
        state = self.sets.get(name)
        if state is None or not self.may_create():
            return
        async with state.lock:
            now = self.clock.now()
            state.warm = self.job_history.warm(state.config, now)
            warm = state.warm.runners if state.warm else 0
            decision = desired(
                state.config, state.assigned, paused=state.paused, now=now, warm=warm
            )
            note_minimum(self, state, decision.minimum)
            plan = plan_scale(
                decision,
                removed=state.removed,
                live=[r.view() for r in self.runners.live(name)],
                creating=self.runners.creating.count(name),
                revisions=self.current_revisions(name),
            )
            state.desired = plan.target
            state.reserve = plan.reserve
            state.warm_runners = plan.warm
            self.metrics.runners_desired.labels(name).set(plan.target)
            self.metrics.runners_warm.labels(name).set(plan.warm)
            for reserve in plan.create:
                self.runners.creating.ask(name)
                self.spawn(self._create_one(state, reserve=reserve))
            for runner in plan.remove:
                record = self.runners.get(runner)
                if record is not None:
                    self.spawn(self.remove(record, RemovalReason.SCALED_DOWN))

    async def _create_one(self, state: ScaleSetState, *, reserve: bool = False) -> None:
        try:
            async with self._create_slots:
                await self.create_runner(state, reserve=reserve)
        except Exception:
            log.exception("runner.create_crashed", scale_set=state.config.name)
        finally:
            self.runners.creating.done_asking(state.config.name)

    async def create_runner(
        self, state: ScaleSetState, *, reserve: bool = False
    ) -> RunnerRecord | None:
        config = state.config
        now = self.clock.now()
        if not self.may_create():
            return None
        # Whether any provider can be tried (its order is worked out once, when one is tried).
        why_not = self.fleet.cannot_place(config.name, now, reserve=reserve)
        self.report_new_holds()
        if why_not:
            self.metrics.scale_up_failures.labels(config.name, "no_capacity").inc()
            log.info("runner.cannot_scale_up", scale_set=config.name, reason=why_not)
            return None
        name = runner_name(config.name)
        self.runners.creating.name(config.name, name)
        intent = CreateIntent(name, config.name, str(uuid.uuid4()), created_at=now)
        self.store.write_intent(intent)
        budget = CreateBudget(now, config.start_timeout)
        try:
            try:
                runner_id, jit_config = await self.github.generate_jit_config(state.id, name)
            except GitHubError as e:
                log.warning("runner.register_failed", scale_set=config.name, error=str(e))
                self.metrics.scale_up_failures.labels(config.name, "error").inc()
                self.store.clear_intent(name)
                return None
            # The registration's id is written with the first Create's provider, in the same
            # transaction, before that call (or before the registration is removed, below):
            # nothing is awaited in between, so the store is never behind at a crash.
            intent = replace(intent, runner_id=runner_id)
            result = await self._place(state, name, intent, jit_config, budget, reserve=reserve)
            self.report_new_holds()
            if isinstance(result, Placed):
                record = RunnerRecord(
                    name=name,
                    scale_set=config.name,
                    provider=result.provider,
                    revision=revision(self.runner_block(config.name, result.provider)),
                    created_at=self.clock.now(),
                    state=RunnerState.STARTING,
                    runner_id=runner_id,
                    machine=result.machine.state,
                )
                self.runners.add(record)
                self.store.clear_intent(name)
                elapsed = budget.elapsed(self.clock.now())
                self.metrics.created.labels(config.name, result.provider).inc()
                self.metrics.create_duration.labels(config.name, result.provider).observe(elapsed)
                self.events.record(
                    "runner",
                    name,
                    "created",
                    scale_set=config.name,
                    provider=result.provider,
                    message=f"created on {result.provider}",
                    create_duration=round(elapsed, 3),
                )
                log.info(
                    "runner.created", scale_set=config.name, provider=result.provider, runner=name
                )
                return record
            self.metrics.scale_up_failures.labels(config.name, "no_capacity").inc()
            log.warning(
                "runner.not_placed", scale_set=config.name, runner=name, reason=result.reason
            )
            if result.stranded_on:
                self.runners.left[name] = self.clock.now() + self.config.timing.left_grace
            if all(t.outcome is Outcome.SKIPPED for t in result.tries):
                self.store.write_intent(intent)  # no Create was asked: its id is not written
            with contextlib.suppress(GitHubError):
                await self.github.remove_runner(runner_id)
            if not result.stranded_on:
                self.store.clear_intent(name)
            return None
        finally:
            self.runners.creating.done(name)

    async def _place(
        self,
        state: ScaleSetState,
        name: str,
        intent: CreateIntent,
        jit_config: str,
        budget: CreateBudget,
        *,
        reserve: bool = False,
    ) -> Placed | NotPlaced:
        config = state.config
        deadline = 0.0
        if config.max_age is not None:
            timing = self.config.timing
            deadline = self.clock.now() + config.max_age + timing.reconcile_interval
            deadline += timing.deadline_grace
        hints = tuple(state.queued.values())[:20]

        def request(provider: str) -> CreateRequest:
            block = self.runner_block(config.name, provider)
            return CreateRequest(
                runner_name=name,
                request_id=intent.request_id,
                scale_set=config.name,
                labels=machine_labels(
                    self.installation, config.name, name, revision(block), provider
                ),
                runner=RunnerBlock.from_mapping(block),
                jit_config=jit_config,
                job_hints=hints,
                deadline=deadline,
                # whatever the provider's own timeout (which bounds its other calls)
                budget=budget.left(self.clock.now()),
            )

        async def create(provider: str) -> Created | Refusal:
            self.store.write_intent(replace(intent, provider=provider))
            asked = request(provider)
            if not asked.budget:
                raise TimeoutError  # nothing is asked, so nothing is left behind
            # The one place the create timeout is enforced: on the engine's clock, which a
            # simulation winds by hand; a gRPC provider's own deadline comes later (rpc.client).
            return await self._timed(
                provider,
                "create",
                within(self.clock, asked.budget, self.providers[provider].create(asked)),
            )

        async def delete(provider: str) -> None:
            await self._timed(
                provider,
                "delete",
                asyncio.wait_for(
                    self.providers[provider].delete(name, Removal(RemovalReason.NOT_PLACED)),
                    self.config.timing.delete_timeout,
                ),
            )

        async def settle(provider: str) -> Created | None:
            from rungar.rpc.settle import Unsettled, settle_unanswered_create

            answer = await settle_unanswered_create(
                self.providers[provider], request(provider), self.clock, tries=2, first_delay=0.5
            )
            if isinstance(answer, Created):
                return answer
            if isinstance(answer, Unsettled):
                return None
            with contextlib.suppress(ProviderError):
                await self.providers[provider].delete(name, Removal(RemovalReason.NOT_PLACED))
                self.runners.left.pop(name, None)
            return None

        return await place(
            self.fleet,
            config.name,
            now=self.clock.now,
            create=create,
            delete=delete,
            settle=settle,
            observe=self._observe,
            reserve=reserve,
        )

    async def _timed(self, provider: str, call: str, awaitable: Awaitable[T]) -> T:
        started = self.clock.now()
        result = "error"
        try:
            value = await awaitable
            result = "no_capacity" if isinstance(value, Refusal) else "ok"
            return value
        finally:
            self.metrics.provider_calls.labels(provider, call, result).inc()
            self.metrics.provider_call_duration.labels(provider, call).observe(
                max(0.0, self.clock.now() - started)
            )

    def report_new_holds(self) -> None:
        """Record an event for each hold placement asked for since the last report."""
        holds, self.fleet.new_holds = self.fleet.new_holds, []
        for hold in holds:
            self.events.record(
                "provider",
                hold.provider,
                "held",
                scale_set=hold.holder,
                provider=hold.provider,
                message=sentences.hold_placed(hold.holder, hold.priority),
                priority=hold.priority,
            )
            log.info(
                "provider.held",
                sentence=sentences.hold_placed(hold.holder, hold.priority),
                provider=hold.provider,
                scale_set=hold.holder,
                priority=hold.priority,
            )

    def _observe(self, scale_set: str, attempt: Try) -> None:
        if attempt.outcome in (Outcome.REFUSED, Outcome.TIMED_OUT) and attempt.refusal:
            backoff = self.fleet.backoff(scale_set, attempt.provider)
            left = backoff.remaining(self.clock.now()) if backoff else 0.0
            refusals = backoff.refusals if backoff else 1
            full = attempt.refusal.kind is RefusalKind.FULL
            action = "full" if full else "failing"
            sentence = sentences.refused(
                scale_set, attempt.provider, full, refusals, left, attempt.message
            )
            self.events.record(
                "provider",
                attempt.provider,
                action,
                scale_set=scale_set,
                provider=attempt.provider,
                message=sentence,
                resource=attempt.refusal.resource,
                refusal=attempt.refusal.kind.value,
                refusals=refusals,
            )
            log.info(
                f"provider.{action}",
                sentence=sentence,
                scale_set=scale_set,
                provider=attempt.provider,
                error=attempt.message,
            )
        elif attempt.outcome is Outcome.UNANSWERED:
            self.events.record(
                "provider",
                attempt.provider,
                "unreachable",
                scale_set=scale_set,
                provider=attempt.provider,
                message=attempt.message,
            )
            log.warning(
                "provider.unreachable",
                sentence=sentences.UNREACHABLE_SINCE,
                provider=attempt.provider,
            )

    # ------------------------------------------------------------------ removal

    async def remove(
        self,
        record: RunnerRecord,
        reason: RemovalReason,
        *,
        forced: bool = False,
        delete: bool = True,
    ) -> bool:
        return await self.removals.remove(record, reason, forced=forced, delete=delete)

    def let_go(
        self, record: RunnerRecord, reason: RemovalReason, conclusion: Conclusion | None = None
    ) -> None:
        self.removals.let_go(record, reason, conclusion)

    async def settle_leaving(self, record: RunnerRecord) -> bool:
        return await self.removals.settle_leaving(record)

    # ------------------------------------------------------------------ GitHub's news

    def on_demand(self, name: str, assigned: int) -> None:
        state = self.sets.get(name)
        if state is None:
            return
        state.assigned = assigned
        state.polled_at = self.clock.now()
        self.metrics.jobs_assigned.labels(name).set(assigned)
        self.metrics.last_poll.labels(name).set(state.polled_at)
        self.spawn(self.scale(name))

    def on_job_assigned(self, name: str, job_id: str, hint: JobHint, at: float = 0.0) -> None:
        """``at``: when GitHub assigned it (0: now); warm pools predict from these times."""
        state = self.sets.get(name)
        if state is not None:
            state.queued[job_id] = hint
            state.assigned_at.setdefault(job_id, self.clock.now())
            self.job_history.record(name, job_id, at or self.clock.now())

    def mark_connected(self, record: RunnerRecord) -> None:
        """The runner was seen on GitHub for the first time: its boot is over."""
        if record.connected:
            return
        record.connected = True
        note_connected(self, record)
        if record.created_at and not record.adopted:
            boot = max(0.0, self.clock.now() - record.created_at)
            self.metrics.boot_duration.labels(record.scale_set, record.provider).observe(boot)
            self.events.record(
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
        """``times`` are GitHub's: its assign and runner-assign times give the job's wait when
        known (they are true across a restart and a late message); else the local clock does."""
        state = self.sets.get(name)
        record = self.runners.get(runner)
        github_wait = times.runner_wait if times is not None else None
        waited: float | None = None
        if state is not None:
            state.queued.pop(job_id, None)
            assigned_at = state.assigned_at.pop(job_id, None)
            if github_wait is not None:
                waited = github_wait
            elif assigned_at is not None:
                waited = self.clock.now() - assigned_at
            if waited is not None:
                self.metrics.job_runner_wait.labels(name).observe(waited)
            self.metrics.jobs_started.labels(name).inc()
        if record is not None and record.state is not RunnerState.LEAVING:
            self.mark_connected(record)
            record.state = RunnerState.BUSY
            record.github = GitHubState.BUSY
            record.job = f"{hint.repository}: {hint.job}" if hint.repository else hint.job
            record.job_id = job_id
            record.hint = replace(hint, job_id=job_id)
            self.events.record(
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
            provider = self.providers.get(record.provider)
            if provider is not None:
                told = replace(hint, job_id=job_id)
                self.spawn(self._tell_provider(record.provider, provider, runner, told))

    async def _tell_provider(
        self, name: str, provider: Provider, runner: str, hint: JobHint
    ) -> None:
        timeout = self.call_timeout(name)
        with contextlib.suppress(RungarError, TimeoutError):
            await asyncio.wait_for(provider.update_runner(runner, hint), timeout)

    def call_timeout(self, provider: str) -> float:
        """The deadline of a provider's List and UpdateRunner calls: its own ``timeout``, else
        ``timing.provider_timeout``."""
        config = self.fleet.providers.get(provider)
        own = config.timeout if config is not None else 0.0
        return own or self.config.timing.provider_timeout

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
        self.metrics.jobs_completed.labels(
            name, conclusion.value if conclusion else "unknown"
        ).inc()
        state = self.sets.get(name)
        if state is not None:
            state.queued.pop(job_id, None)
            state.assigned_at.pop(job_id, None)
        record = self.runners.get(runner)
        if record is None or record.state is RunnerState.LEAVING:
            return
        if record.hint is None and hint is not None and (hint.job or hint.repository):
            record.hint = replace(hint, job_id=job_id)  # its start was missed
        # An ephemeral runner takes one job; GitHub removes its registration itself.
        self.let_go(record, RemovalReason.JOB_COMPLETED, conclusion)
        self.spawn(self._settle_soon(record))

    async def _settle_soon(self, record: RunnerRecord) -> None:
        await self.settle_leaving(record)
