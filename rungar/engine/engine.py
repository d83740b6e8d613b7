"""The engine: turns demand into runners through placement, and keeps the fleet honest.

``Engine`` only composes. What every concern shares is one explicit
:class:`~rungar.engine.core.context.EngineContext` (the configuration, the providers, GitHub, the
clock, the store, the event log, the metrics, the runner table, the scale sets, the placement
:class:`Fleet`, the work in flight, the acting guard); each concern receives it and the other
concerns it calls, never the engine:

- :mod:`rungar.engine.jobs.book`: GitHub's news of jobs assigned, started and completed; demand
  goes to the scaler;
- :mod:`rungar.engine.jobs.scaler`: a scale set's scaling step, decided (the pure plan) then
  carried out: creates to the creations, idle surplus to the removals;
- :mod:`rungar.engine.create.creating`: creating runners (placement attempt, Creates,
  intents), each recorded in the runner table;
- :mod:`rungar.engine.remove.removing`: removing runners and deleting their machines;
- :mod:`rungar.engine.create.rooms`: room opening on a provider, and who gets it (its holder
  at once; an idle runner on a dearer provider moved to it);
- :mod:`rungar.engine.reconcile.reconciler`: the reconcile pass;
- :mod:`rungar.engine.core.acting`: whether this daemon may act (the lease).

So a runner reads straight down from its job to its Create: ``JobBook.on_demand`` →
``Scaler.scale`` (plan) → ``Creations.create_one`` (act) → the runner table (record).

One event loop; every provider and GitHub call is awaited without holding state locks, and
every state change is a synchronous step, so concurrent creates never overshoot a limit
(claims are checked and taken in one step).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from rungar.clock import Clock
from rungar.config.model import ScaleSetsFile
from rungar.engine.core.acting import ActingGuard, Lease
from rungar.engine.core.context import EngineContext, Findings
from rungar.engine.core.leftovers import Leftover
from rungar.engine.core.records import RunnerRecord, RunnerTable
from rungar.engine.core.scale_set_state import ScaleSetState
from rungar.engine.core.tasks import Tasks
from rungar.engine.create.creating import Creations
from rungar.engine.create.rooms import Rooms
from rungar.engine.jobs.book import JobBook
from rungar.engine.jobs.job_history import JobHistory
from rungar.engine.jobs.scaler import Scaler
from rungar.engine.reconcile.recall import recall
from rungar.engine.reconcile.reconciler import Reconciler
from rungar.engine.reconcile.starting_sync import StartingSync
from rungar.engine.remove import reruns
from rungar.engine.remove.removing import Removals
from rungar.engine.report.events import EventLog
from rungar.engine.report.metrics import Metrics
from rungar.github.interface import GitHub, JobTimes, RunnerStatus
from rungar.github.registrations import RegistrationQueue
from rungar.model.machine import Conclusion, JobHint
from rungar.model.provider import Provider
from rungar.model.runner import RemovalReason
from rungar.placement import Fleet
from rungar.store.sqlite import SqliteStore


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
        github_url: str = "",
        registrations: RegistrationQueue | None = None,
    ) -> None:
        ctx = EngineContext(
            config=config,
            providers=dict(providers),
            github=github,
            clock=clock,
            store=store,
            events=events,
            metrics=metrics or Metrics(),
            fleet=Fleet(config.providers, config.scale_sets, config.timing),
            installation=installation,
            registrations=registrations or RegistrationQueue(clock),
            started_at=clock.now(),
            github_url=github_url,
        )
        for scale_set in config.scale_sets:
            ctx.sets[scale_set.name] = ScaleSetState(scale_set, watchers=ctx.phase_watchers)
        self.ctx = ctx
        backoffs, holds = store.load_placement()
        ctx.fleet.restore_state(backoffs, holds)
        ctx.fleet.restore_crash_loops(store.load_crash_loops())
        self.job_history = JobHistory(store, config.scale_sets, clock.now())
        reruns.restore(ctx)
        # Room opening reaches the scaler and the creations made just below, when it happens.
        self.rooms = Rooms(
            ctx,
            scale=lambda name: self.scaler.scale(name),
            create_cheaper=self._create_cheaper,
            remove=lambda record: self.removals.remove(record, RemovalReason.SCALED_DOWN),
        )
        self.removals = Removals(ctx, self.rooms)
        self.creations = Creations(ctx, max_parallel_creates, self.rooms)
        self.scaler = Scaler(ctx, self.creations, self.removals, self.job_history)
        self.jobs = JobBook(ctx, self.scaler, self.removals, self.job_history)
        # The runners it knew count until their providers list them; the table is kept.
        self.runner_keeper = recall(ctx)
        self.reconciler = Reconciler(ctx, self.scaler, self.removals, self.jobs, self.runner_keeper)
        self.starting = StartingSync(ctx, self.jobs, self.removals, self.scaler)

    # ------------------------------------------------------------------ what it holds

    @property
    def config(self) -> ScaleSetsFile:
        return self.ctx.config

    @config.setter
    def config(self, config: ScaleSetsFile) -> None:
        self.ctx.config = config

    @property
    def providers(self) -> dict[str, Provider]:
        return self.ctx.providers

    @property
    def github(self) -> GitHub:
        return self.ctx.github

    @property
    def clock(self) -> Clock:
        return self.ctx.clock

    @property
    def store(self) -> SqliteStore:
        return self.ctx.store

    @property
    def events(self) -> EventLog:
        return self.ctx.events

    @property
    def metrics(self) -> Metrics:
        return self.ctx.metrics

    @property
    def installation(self) -> str:
        return self.ctx.installation

    @property
    def started_at(self) -> float:
        return self.ctx.started_at

    @property
    def github_url(self) -> str:
        return self.ctx.github_url

    @property
    def fleet(self) -> Fleet:
        return self.ctx.fleet

    @property
    def runners(self) -> RunnerTable:
        return self.ctx.runners

    @property
    def sets(self) -> dict[str, ScaleSetState]:
        return self.ctx.sets

    @property
    def phase_watchers(self) -> list[Callable[[], None]]:
        return self.ctx.phase_watchers

    @property
    def tasks(self) -> Tasks:
        return self.ctx.tasks

    @property
    def guard(self) -> ActingGuard:
        return self.ctx.guard

    @property
    def findings(self) -> Findings:
        return self.ctx.findings

    @property
    def registrations(self) -> RegistrationQueue:
        return self.ctx.registrations

    @property
    def listed_runners(self) -> list[RunnerStatus]:
        return self.ctx.findings.listed_runners

    @property
    def leftovers(self) -> list[Leftover]:
        return self.ctx.findings.leftovers

    @property
    def leftovers_reported(self) -> set[str]:
        return self.ctx.findings.leftovers_reported

    @property
    def draining_providers(self) -> set[str]:
        return self.ctx.findings.draining_providers

    @property
    def list_errors(self) -> dict[str, str]:
        return self.ctx.findings.list_errors

    @property
    def orphans_seen(self) -> dict[str, float]:
        return self.ctx.findings.orphans_seen

    @property
    def github_calls_exported(self) -> dict[str, int]:
        return self.ctx.findings.github_calls_exported

    # ------------------------------------------------------------------ helpers

    def spawn(self, coro: Coroutine[Any, Any, object]) -> asyncio.Task[object]:
        return self.ctx.spawn(coro)

    async def drain_tasks(self) -> None:
        """Wait for every create and removal in flight (tests and clean shutdowns)."""
        await self.ctx.tasks.drain()

    def runner_block(self, scale_set: str, provider: str) -> dict[str, object]:
        return self.ctx.runner_block(scale_set, provider).block

    def current_revisions(self, scale_set: str) -> dict[str, str]:
        return self.ctx.revisions(scale_set)

    def save_placement(self) -> None:
        self.ctx.save_placement()

    def resync_fleet_counts(self) -> None:
        self.ctx.resync_fleet_counts()

    async def reconcile(self) -> None:
        """One reconcile pass (:mod:`rungar.engine.reconcile.reconciler`)."""
        await self.reconciler.reconcile()

    async def probe_unreachable(self) -> list[str]:
        return await self.reconciler.probe_unreachable()

    async def sync_starting(self) -> list[str]:
        """Check the starting runners against GitHub once
        (:mod:`rungar.engine.reconcile.starting_sync`)."""
        return await self.starting.sync()

    # ------------------------------------------------------------------ the lease

    @property
    def lease(self) -> Lease | None:
        return self.ctx.guard.lease

    @lease.setter
    def lease(self, keeper: Lease | None) -> None:
        self.ctx.guard.lease = keeper

    def acting(self) -> bool:
        return self.guard.acting()

    def may_create(self) -> bool:
        return self.guard.may_create()

    # ------------------------------------------------------------------ scaling

    async def scale(self, name: str) -> None:
        """Apply the scale set's last decision: create what is missing, remove idle surplus."""
        await self.scaler.scale(name)

    async def create_runner(
        self, state: ScaleSetState, *, reserve: bool = False
    ) -> RunnerRecord | None:
        return await self.creations.create_runner(state, reserve=reserve)

    async def _create_cheaper(self, scale_set: str, price: float) -> RunnerRecord | None:
        """A reserve runner of ``scale_set`` on a provider priced below ``price``."""
        state = self.ctx.sets.get(scale_set)
        if state is None:
            return None
        return await self.creations.create_runner(state, reserve=True, cheaper_than=price)

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
        self.jobs.on_demand(name, assigned)

    def on_job_assigned(self, name: str, job_id: str, hint: JobHint, at: float = 0.0) -> None:
        self.jobs.on_job_assigned(name, job_id, hint, at)

    def mark_connected(self, record: RunnerRecord) -> None:
        self.jobs.mark_connected(record)

    def on_job_started(
        self, name: str, job_id: str, runner: str, hint: JobHint, times: JobTimes | None = None
    ) -> None:
        self.jobs.on_job_started(name, job_id, runner, hint, times)

    def on_job_completed(
        self,
        name: str,
        job_id: str,
        runner: str,
        conclusion: Conclusion | None,
        hint: JobHint | None = None,
    ) -> None:
        self.jobs.on_job_completed(name, job_id, runner, conclusion, hint)

    def call_timeout(self, provider: str) -> float:
        return self.ctx.call_timeout(provider)
