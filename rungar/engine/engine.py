"""The engine: turns demand into runners through placement, and keeps the fleet honest.

A thin composition of one module per concern, each owning its state; ``Engine`` holds what
they share (the configuration, the providers, GitHub, the clock, the store, the runner table,
the scale sets and the placement :class:`Fleet`) and keeps the public surface the run loop,
the reconcile pass, the status and control read:

- :mod:`rungar.engine.scaler`: a scale set's scaling step, decided then carried out;
- :mod:`rungar.engine.creating`: creating runners (placement attempt, Creates, intents);
- :mod:`rungar.engine.removing`: removing runners and deleting their machines;
- :mod:`rungar.engine.jobs`: GitHub's news of jobs assigned, started and completed;
- :mod:`rungar.engine.acting`: whether this daemon may act (the lease);
- :mod:`rungar.engine.tasks`: the work in flight.

One event loop; every provider and GitHub call is awaited without holding state locks, and
every state change is a synchronous step, so concurrent creates never overshoot a limit
(claims are checked and taken in one step).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any

from rungar.clock import Clock
from rungar.config.model import ScaleSetsFile
from rungar.engine.acting import ActingGuard
from rungar.engine.creating import Creations
from rungar.engine.events import EventLog
from rungar.engine.job_history import JobHistory
from rungar.engine.jobs import JobBook
from rungar.engine.leftovers import Leftover
from rungar.engine.metrics import Metrics
from rungar.engine.naming import revision
from rungar.engine.recall import recall
from rungar.engine.records import RunnerRecord, RunnerTable
from rungar.engine.removing import Removals
from rungar.engine.scale_set_state import ScaleSetState
from rungar.engine.scaler import Scaler
from rungar.engine.tasks import Tasks
from rungar.github.interface import GitHub, JobTimes, RunnerStatus
from rungar.model.machine import Conclusion, JobHint
from rungar.model.provider import Provider
from rungar.model.runner import RemovalReason
from rungar.placement import Fleet
from rungar.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from rungar.engine.lease import LeaseKeeper


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
        self.creations = Creations(self, max_parallel_creates)
        self.removals = Removals(self)
        self.jobs = JobBook(self)
        self.scaler = Scaler(self)
        self.tasks = Tasks()
        self.started_at = clock.now()
        self.guard = ActingGuard()  # the lease, when there is one: whether this daemon acts
        backoffs, holds = store.load_placement()
        self.fleet.restore_state(backoffs, holds)
        self.fleet.restore_crash_loops(store.load_crash_loops())
        self.job_history = JobHistory(store, config.scale_sets, clock.now())
        # The runners it knew count until their providers list them; the table is kept.
        self.runner_keeper = recall(self)

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
        await self.scaler.scale(name)

    async def create_runner(
        self, state: ScaleSetState, *, reserve: bool = False
    ) -> RunnerRecord | None:
        return await self.creations.create_runner(state, reserve=reserve)

    def report_new_holds(self) -> None:
        """Record an event for each hold placement asked for since the last report."""
        self.creations.report_new_holds()

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
        """The deadline of a provider's List and UpdateRunner calls: its own ``timeout``, else
        ``timing.provider_timeout``."""
        config = self.fleet.providers.get(provider)
        own = config.timeout if config is not None else 0.0
        return own or self.config.timing.provider_timeout
