"""The engine: turns demand into runners through placement, and keeps the fleet honest.

``Engine`` only composes: it builds each concern on one explicit
:class:`~rungar.engine.core.context.EngineContext` (the configuration, the providers, GitHub, the
clock, the store, the event log, the metrics, the runner table, the scale sets, the placement
:class:`Fleet`, the work in flight, the acting guard) and hands each the other concerns it
calls, never the engine. Its remaining members only read the context or pass a call on. The
concerns live in rooms below it (docs/architecture.md), each importing only rooms below its own:

- ``jobs/``: GitHub's news of jobs assigned, started and completed
  (:mod:`rungar.engine.jobs.book`), and a scale set's scaling step carried out
  (:mod:`rungar.engine.jobs.scaler`): creates to the creations, idle surplus to the removals;
- ``remove/``: removing runners and deleting their machines; jobs lost with them re-run;
- ``create/``: creating runners (placement attempt, Creates, intents), each recorded in the
  runner table; room opening on a provider, and who gets it
  (:mod:`rungar.engine.create.rooms`: its holder at once; an idle runner on a dearer provider
  moved to it);
- ``reconcile/``: the reconcile pass, its pure plans, and the sync of starting runners;
- ``core/``: the context and what it holds, with :mod:`rungar.engine.core.acting`, whether
  this daemon may act (the lease); ``report/``: the event log and the metrics.

So a runner reads straight down from its job to its Create: ``JobBook.on_demand`` →
``Scaler.scale`` (plan) → ``Creations.create_one`` (act) → the runner table (record).

One event loop; every provider and GitHub call is awaited without holding state locks, and
every state change is a synchronous step, so concurrent creates never overshoot a limit
(claims are checked and taken in one step).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping
from typing import Any

from rungar.clock import Clock
from rungar.config.model import ScaleSetsFile
from rungar.engine.core.acting import Lease
from rungar.engine.core.context import EngineContext
from rungar.engine.core.records import RunnerRecord, RunnerTable
from rungar.engine.core.scale_set_state import ScaleSetState
from rungar.engine.core.tasks import Tasks
from rungar.engine.create.creating import Creations
from rungar.engine.create.rooms import Rooms
from rungar.engine.jobs.book import JobBook
from rungar.engine.jobs.job_history import JobHistory
from rungar.engine.jobs.reasons import JobReasons
from rungar.engine.jobs.scaler import Scaler
from rungar.engine.reconcile.recall import recall
from rungar.engine.reconcile.reconciler import Reconciler
from rungar.engine.reconcile.starting_sync import StartingSync
from rungar.engine.remove import reruns
from rungar.engine.remove.removing import Removals
from rungar.engine.report.events import EventLog
from rungar.engine.report.metrics import Metrics
from rungar.github.interface import GitHub, JobTimes
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
        ctx.fleet.versions.restore_turned_away(store.load_turned_away())
        self.job_history = JobHistory(store, config.scale_sets, clock.now())
        reruns.restore(ctx)
        # Room opening reaches the scaler and the creations made just below, when it happens.
        self.rooms = Rooms(
            ctx,
            scale=lambda name: self.scaler.scale(name),
            create_cheaper=lambda scale_set, price: self.creations.create_cheaper(scale_set, price),
            remove=lambda record: self.removals.remove(record, RemovalReason.SCALED_DOWN),
        )
        self.removals = Removals(ctx, self.rooms)
        self.creations = Creations(ctx, max_parallel_creates, self.rooms)
        self.scaler = Scaler(ctx, self.creations, self.removals, self.job_history)
        self.jobs = JobBook(ctx, self.scaler, self.removals, self.job_history)
        # Why a job waits, told on GitHub (docs/github.md): run by the daemon's loops.
        self.reasons = JobReasons(ctx)
        # The runners it knew count until their providers list them; the table is kept.
        self.runner_keeper = recall(ctx)
        self.reconciler = Reconciler(ctx, self.scaler, self.removals, self.jobs, self.runner_keeper)
        self.starting = StartingSync(ctx, self.jobs, self.removals, self.scaler)

    # ------------------------------------------------------------------ what it holds

    @property
    def config(self) -> ScaleSetsFile:
        return self.ctx.config

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
    def fleet(self) -> Fleet:
        return self.ctx.fleet

    @property
    def runners(self) -> RunnerTable:
        return self.ctx.runners

    @property
    def sets(self) -> dict[str, ScaleSetState]:
        return self.ctx.sets

    @property
    def tasks(self) -> Tasks:
        return self.ctx.tasks

    @property
    def registrations(self) -> RegistrationQueue:
        return self.ctx.registrations

    # ------------------------------------------------------------------ helpers

    def spawn(self, coro: Coroutine[Any, Any, object]) -> asyncio.Task[object]:
        return self.ctx.spawn(coro)

    async def drain_tasks(self) -> None:
        """Wait for every create and removal in flight (tests and clean shutdowns)."""
        await self.ctx.tasks.drain()

    def current_revisions(self, scale_set: str) -> dict[str, str]:
        return self.ctx.revisions(scale_set)

    def save_placement(self) -> None:
        self.ctx.save_placement()

    async def reconcile(self) -> None:
        """One reconcile pass (:mod:`rungar.engine.reconcile.reconciler`)."""
        await self.reconciler.reconcile()

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
        return self.ctx.guard.acting()

    # ------------------------------------------------------------------ scaling

    async def scale(self, name: str) -> None:
        """Apply the scale set's last decision: create what is missing, remove idle surplus."""
        await self.scaler.scale(name)

    async def create_runner(
        self, state: ScaleSetState, *, reserve: bool = False
    ) -> RunnerRecord | None:
        return await self.creations.create_runner(state, reserve=reserve)

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
        self.reasons.job_left(job_id)

    def on_job_completed(
        self,
        name: str,
        job_id: str,
        runner: str,
        conclusion: Conclusion | None,
        hint: JobHint | None = None,
    ) -> None:
        self.jobs.on_job_completed(name, job_id, runner, conclusion, hint)
        self.reasons.job_left(job_id)
