"""What every concern of the engine shares, handed to each one explicitly.

:class:`EngineContext` holds the collaborators (the configuration, the providers, GitHub, the
clock, the store, the event log, the metrics, the placement :class:`Fleet`, the runner table,
the scale sets, the work in flight and the acting guard) and the few rules they all read: a
scale set's runner block and its revision, a provider's call timeout, the fleet's counts. A
concern (scaling, creating, removing, jobs, the lease, a reconcile pass) receives the context
and the other concerns it calls, never the :class:`rungar.engine.engine.Engine` that composes
them, so each reads straight down to what it uses.

:class:`Findings` is what the reconcile passes last learned and ``rungar status`` shows: each
pass overwrites its own part of it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rungar.clock import Clock
from rungar.config.model import ScaleSetConfig, ScaleSetsFile
from rungar.engine.core.acting import ActingGuard, Lease
from rungar.engine.core.leftovers import Leftover
from rungar.engine.core.naming import revision
from rungar.engine.core.records import RunnerTable
from rungar.engine.core.scale_set_state import ScaleSetState
from rungar.engine.core.tasks import Tasks
from rungar.engine.report.events import EventLog
from rungar.engine.report.metrics import Metrics
from rungar.engine.report.provider_calls import timed
from rungar.github.interface import GitHub, RunnerStatus
from rungar.github.registrations import RegistrationQueue
from rungar.model.machine import Removal
from rungar.model.provider import Provider
from rungar.placement import Fleet
from rungar.stopping import within
from rungar.store.sqlite import SqliteStore

T = TypeVar("T")


@dataclass(slots=True)
class LostJob:
    """A job whose runner was lost with its machine while it ran it."""

    scale_set: str
    runner: str
    repository: str
    run_id: str
    job: str


@dataclass(slots=True)
class RerunBook:
    """Jobs lost with their machine, and those re-run (rungar.engine.remove.reruns)."""

    lost: dict[str, LostJob] = field(default_factory=dict)  # job id -> the job lost
    # Jobs re-run, by (repository, run id, job name): a re-run attempt has a job id of its
    # own, and is not re-run again if it is lost too.
    rerun: set[tuple[str, str, str]] = field(default_factory=set)
    last: str = ""  # the last re-run's sentence, for rungar status
    done: int = 0  # jobs GitHub accepted a re-run of
    pruned_at: float = 0.0  # when the state database's records were last pruned


@dataclass(frozen=True, slots=True)
class ProviderBlock:
    """A provider's merged runner block for a scale set, and its revision (computed once)."""

    block: dict[str, object]
    revision: str


@dataclass(slots=True)
class Findings:
    """What the last reconcile passes found, for the next pass and for ``rungar status``."""

    # GitHub's last list of the installation's runners.
    listed_runners: list[RunnerStatus] = field(default_factory=list)
    # Scale sets no longer configured whose runners remain (rungar.engine.core.leftovers), and
    # every one ever reported (its gauge is set back to 0 once it is gone).
    leftovers: list[Leftover] = field(default_factory=list)
    leftovers_reported: set[str] = field(default_factory=set)
    # why a provider is unreachable: the last List, Create or Delete that got no answer
    list_errors: dict[str, str] = field(default_factory=dict)
    orphans_seen: dict[str, float] = field(default_factory=dict)  # registration -> first seen
    github_calls_exported: dict[str, int] = field(default_factory=dict)
    reconnects_exported: dict[str, int] = field(default_factory=dict)  # by provider
    draining_providers: set[str] = field(default_factory=set)
    # Crashed runners whose output is still to be read (why, crashes in a row), and the last
    # crashed runner's output per (scale set, provider), shown with its crash loop.
    crashes_to_report: dict[str, tuple[str, int]] = field(default_factory=dict)
    crash_output: dict[tuple[str, str], tuple[str, tuple[str, ...]]] = field(default_factory=dict)
    reruns: RerunBook = field(default_factory=lambda: RerunBook())
    # What a provider listed that could not be believed, each (provider, fault kind, machine)
    # reported once: its sentence, shown by rungar status (rungar.engine.reconcile.ownership).
    listing_faults: dict[tuple[str, str, str], str] = field(default_factory=dict)
    # Runner versions (rungar.engine.reconcile.runner_versions): the providers whose days left
    # are exported, the warning last told of each (runner, latest release, deadline passed),
    # and whether GitHub's naming no release was said
    runner_days_exported: set[str] = field(default_factory=set)
    runner_deadlines_told: dict[str, tuple[str, str, bool]] = field(default_factory=dict)
    no_runner_release_said: bool = False


@dataclass(eq=False, slots=True)
class EngineContext:
    config: ScaleSetsFile
    providers: dict[str, Provider]
    github: GitHub
    clock: Clock
    store: SqliteStore
    events: EventLog
    metrics: Metrics
    fleet: Fleet
    installation: str
    # One registration pace for the installation: every scale set's creates in one queue.
    registrations: RegistrationQueue
    runners: RunnerTable = field(default_factory=RunnerTable)
    sets: dict[str, ScaleSetState] = field(default_factory=dict)
    tasks: Tasks = field(default_factory=Tasks)
    guard: ActingGuard = field(default_factory=ActingGuard)
    findings: Findings = field(default_factory=Findings)
    # Told of every scale set's phase change; shared by the scale sets `rungar apply` adds.
    phase_watchers: list[Callable[[], None]] = field(default_factory=list)
    # What rungar status tells of the daemon itself: when it started, which GitHub it serves.
    started_at: float = 0.0
    github_url: str = ""
    settings_path: str = ""  # the rungar.yaml it was started with ("" when none was read)
    # Each scale set's providers' runner blocks and revisions, for the configuration they were
    # worked out from (a new one, from `rungar apply`, works them out again).
    _blocks: dict[str, tuple[ScaleSetConfig, dict[str, ProviderBlock]]] = field(
        default_factory=dict, init=False, repr=False
    )

    @property
    def lease(self) -> Lease | None:
        """The lease this daemon keeps (:mod:`rungar.daemon.lease`); None when it acts alone."""
        return self.guard.lease

    def spawn(self, coro: Coroutine[Any, Any, object]) -> asyncio.Task[object]:
        return self.tasks.spawn(coro)

    def acting(self) -> bool:
        return self.guard.acting()

    def may_create(self) -> bool:
        return self.guard.may_create()

    def runner_block(self, scale_set: str, provider: str) -> ProviderBlock:
        """The provider's runner block in the scale set's configuration, with its revision (an
        empty block for a provider the scale set does not name); the caller's own copy."""
        known = self.runner_blocks(scale_set).get(provider)
        if known is None:
            return ProviderBlock({}, revision({}))
        return ProviderBlock(dict(known.block), known.revision)

    def runner_blocks(self, scale_set: str) -> dict[str, ProviderBlock]:
        """Each of the scale set's providers' runner block with its revision, worked out once
        per configuration of the scale set (a create asks for them all). Shared: read only."""
        config = self.sets[scale_set].config
        known = self._blocks.get(scale_set)
        if known is not None and known[0] is config:
            return known[1]
        blocks: dict[str, ProviderBlock] = {}
        for entry in config.providers:
            if entry.name not in blocks:  # a name given twice: its first entry counts
                block = dict(entry.runner)
                blocks[entry.name] = ProviderBlock(block, revision(block))
        self._blocks[scale_set] = (config, blocks)
        return blocks

    def revisions(self, scale_set: str) -> dict[str, str]:
        """Each of the scale set's providers' current revision of its runner block."""
        return {name: b.revision for name, b in self.runner_blocks(scale_set).items()}

    def resync_fleet_counts(self) -> None:
        self.fleet.set_runners(self.runners.counts())
        leaving = self.runners.leaving_by_provider()
        for name in self.fleet.providers:
            self.fleet.set_leaving(name, leaving.get(name, 0))

    def save_placement(self) -> None:
        backoffs, holds = self.fleet.export_state()
        self.store.save_placement(backoffs, holds)
        self.store.save_crash_loops(self.fleet.export_crash_loops())
        self.store.save_turned_away(self.fleet.versions.export_turned_away())

    def call_timeout(self, provider: str) -> float:
        """The deadline of a provider's List and UpdateRunner calls: its own ``timeout``, else
        ``timing.provider_timeout``."""
        config = self.fleet.providers.get(provider)
        own = config.timeout if config is not None else 0.0
        return own or self.config.timing.provider_timeout

    async def call(self, provider: str, call: str, awaitable: Awaitable[T]) -> T:
        """A provider call's answer; its result and duration are exported."""
        return await timed(self.metrics, self.clock, provider, call, awaitable)

    async def delete_machine(self, provider: str, name: str, removal: Removal | None) -> None:
        """Ask ``provider`` to delete the machine, within ``timing.delete_timeout``."""
        await self.call(
            provider,
            "delete",
            within(
                self.providers[provider].delete(name, removal),
                self.config.timing.delete_timeout,
                "Delete",
            ),
        )
