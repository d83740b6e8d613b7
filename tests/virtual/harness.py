"""The real engine on a virtual clock: one process, no sockets, no sleeping.

:class:`VirtualFleet` runs :class:`rungar.engine.engine.Engine` as ``rungar serve`` wires it —
placement, scaling, reconcile passes, the SQLite state file, the event log — against in-process
:class:`rungar.testing.fake_provider.FakeProvider` hosts and a
:class:`rungar.testing.fake_github.FakeGitHub`, on a :class:`rungar.testing.clock.FakeClock`.
It plays GitHub's side the way the message queue tells it to the daemon:

- a queued job is assigned to its scale set: ``on_job_assigned`` and the new assigned count
  (``on_demand``, queued and running jobs), as the listener's messages carry them;
- a runner's machine boots in ``boot`` seconds and its registration comes online, idle (unless
  its provider is listed in ``never_boot``: its runners never connect);
- an idle online runner takes its scale set's oldest queued job at once (``on_job_started``);
- a job runs its ``duration``, then completes (``on_job_completed``); the ephemeral runner's
  registration goes and its machine stops;
- a reconcile pass runs every ``timing.reconcile_interval``, as the run loop's does.

Time moves from one event to the next (a job queued, a runner booted, a job done, a pass due,
a sleeper on the clock due), so an hour of a fleet costs milliseconds. After every event
:meth:`VirtualFleet.check` asserts the fleet's promises (no scale set or provider over its
``max_runners``, no runner on two providers, no job started twice); a break names the seed and
the command that replays it (:func:`replay_hint`). The same seed gives the same run.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import os
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from rungar.config.model import ScaleSetsFile
from rungar.engine.engine import Engine
from rungar.engine.report.events import EventLog
from rungar.model import labels as L
from rungar.model.machine import Conclusion, JobHint, Machine, MachineState
from rungar.model.phase import Phase
from rungar.store.sqlite import SqliteStore
from rungar.testing.clock import FakeClock
from rungar.testing.fake_github import FakeGitHub
from rungar.testing.fake_provider import GIB, FakeProvider

START = 1_800_000_000.0
SEED_VARIABLE = "RUNGAR_VIRTUAL_SEED"
# Most rounds of the event loop after each event: every engine task that is not waiting on the
# virtual clock finishes within a few (nothing here waits on a socket or a thread).
SETTLE_ROUNDS = 200


def seeds(default: Iterable[int]) -> list[int]:
    """The seeds a test runs: ``RUNGAR_VIRTUAL_SEED`` (one seed, to replay it), else ``default``."""
    chosen = os.environ.get(SEED_VARIABLE, "")
    return [int(chosen)] if chosen else list(default)


def replay_hint(seed: int) -> str:
    """The command that runs the current test again with this seed alone."""
    test = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0].split("[")[0]
    return f"{SEED_VARIABLE}={seed} .venv/bin/pytest -q '{test}'"


class FleetBroken(AssertionError):
    """A promise of the fleet broken: names the seed, the moment and how to replay it."""

    def __init__(self, seed: int, at: float, message: str) -> None:
        super().__init__(
            f"seed {seed}, {at - START:.0f} s in: {message}\n  replay: {replay_hint(seed)}"
        )


@dataclass(frozen=True)
class Host:
    """A provider's room: runners are refused ``full`` past it."""

    vcpus: float = 64.0
    memory_gib: float = 256.0
    max_machines: int | None = None


@dataclass
class Job:
    id: str
    scale_set: str
    queued_at: float
    duration: float
    runner: str = ""
    started_at: float | None = None
    done_at: float | None = None
    conclusion: Conclusion = Conclusion.SUCCEEDED

    @property
    def hint(self) -> JobHint:
        return JobHint("octo-org/app", "ci.yml", f"build-{self.id}", job_id=self.id)


class VirtualFleet:
    def __init__(
        self,
        root: Path,
        config: ScaleSetsFile,
        hosts: Mapping[str, Host],
        *,
        seed: int = 0,
        boot: float = 5.0,
        never_boot: Iterable[str] = (),
    ) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.config = config
        self.seed = seed
        self.rng = random.Random(seed)
        self.boot = boot
        self.never_boot = set(never_boot)
        self.clock = FakeClock(START)
        self.github = FakeGitHub()
        self.providers = {
            name: FakeProvider(
                name,
                vcpus=host.vcpus,
                memory_bytes=int(host.memory_gib * GIB),
                max_machines=host.max_machines,
                clock=self.clock,
            )
            for name, host in hosts.items()
        }
        self.jobs: dict[str, Job] = {}
        self.queued: dict[str, list[str]] = {s.name: [] for s in config.scale_sets}
        self.seen: dict[str, float] = {}  # machine -> when it was first on its provider
        self.arrivals: list[tuple[float, int, str, float]] = []  # at, n, scale set, duration
        self.next_pass = START
        self._ids = itertools.count(1)
        self._order = itertools.count()
        self.engine = self.new_engine()

    # ------------------------------------------------------------------ the daemon

    def new_engine(self) -> Engine:
        return Engine(
            self.config,
            self.providers,
            self.github,
            clock=self.clock,
            store=SqliteStore(self.root / "state.db", now=self.clock.now),
            events=EventLog(self.clock, self.root / "events.jsonl"),
            installation="gh-virtual",
        )

    async def start(self) -> None:
        for state in self.engine.sets.values():
            state.id = await self.github.ensure_scale_set(state.config)
            state.phase = Phase.LISTENING
        await self.reconcile()

    async def restart(self) -> None:
        """The daemon stops (its tasks cut short, as at a crash) and a new one starts on the
        same state file; the providers and GitHub carry on."""
        for task in asyncio.all_tasks():  # in this loop, only the engine's creates and removals
            if task is not asyncio.current_task():
                task.cancel()
        await self.settle()
        self.engine.store.close()
        self.engine = self.new_engine()
        await self.start()
        for name in self.queued:  # the listener's first message tells the assigned count
            self.engine.on_demand(name, self.assigned(name))
        await self.settle()

    async def reconcile(self) -> None:
        await self.engine.reconcile()
        await self.settle()
        self.next_pass = self.clock.now() + self.config.timing.reconcile_interval

    async def settle(self) -> None:
        """Let every engine task run until each is done or waits on the virtual clock."""
        loop = asyncio.get_running_loop()
        for _ in range(SETTLE_ROUNDS):
            await asyncio.sleep(0)
            # Nothing left to run at this instant: asyncio keeps no public view of its queue.
            if not getattr(loop, "_ready", True):
                return

    # ------------------------------------------------------------------ GitHub's side

    def assigned(self, scale_set: str) -> int:
        return sum(1 for j in self.jobs.values() if j.scale_set == scale_set and j.done_at is None)

    async def queue(self, scale_set: str, n: int = 1, duration: float = 60.0) -> list[Job]:
        """``n`` jobs queued now, each running ``duration`` seconds once a runner takes it."""
        jobs = []
        for _ in range(n):
            job = Job(str(next(self._ids)), scale_set, self.clock.now(), duration)
            self.jobs[job.id] = job
            self.queued[scale_set].append(job.id)
            self.engine.on_job_assigned(scale_set, job.id, job.hint)
            jobs.append(job)
        self.engine.on_demand(scale_set, self.assigned(scale_set))
        await self.settle()
        await self.github_acts()
        return jobs

    def queue_at(self, at: float, scale_set: str, n: int = 1, duration: float = 60.0) -> None:
        heapq.heappush(self.arrivals, (at, next(self._order), scale_set, duration))
        for _ in range(n - 1):
            heapq.heappush(self.arrivals, (at, next(self._order), scale_set, duration))

    async def github_acts(self) -> None:
        """Everything GitHub does at this instant: boots end, idle runners take jobs, jobs end."""
        now = self.clock.now()
        for provider in self.providers.values():
            for machine in provider.machines:
                self.seen.setdefault(machine.name, now)
        changed: set[str] = set()
        for job in self.jobs.values():
            running = job.started_at is not None and job.done_at is None
            if running and now >= (job.started_at or 0.0) + job.duration:
                self.complete(job)
                changed.add(job.scale_set)
        for runner in list(self.github.runners.values()):
            found = self.machine(runner.name)
            if found is None or runner.online or found[0] in self.never_boot:
                continue
            if found[1].state is MachineState.STOPPED:
                continue
            if now >= self.seen[runner.name] + self.boot:
                runner.online = True
        for runner in list(self.github.runners.values()):
            if not runner.online or runner.busy:
                continue
            scale_set = next(
                (n for n, i in self.github.scale_sets.items() if i == runner.scale_set_id), ""
            )
            if self.queued.get(scale_set):
                self.start_job(self.jobs[self.queued[scale_set].pop(0)], runner.name)
        for scale_set in sorted(changed):
            self.engine.on_demand(scale_set, self.assigned(scale_set))
        await self.settle()

    def machine(self, name: str) -> tuple[str, Machine] | None:
        for provider_name, provider in self.providers.items():
            for machine in provider.machines:
                if machine.name == name:
                    return provider_name, machine
        return None

    def start_job(self, job: Job, runner: str) -> None:
        if job.started_at is not None:
            raise FleetBroken(self.seed, self.clock.now(), f"job {job.id} started twice")
        job.runner, job.started_at = runner, self.clock.now()
        self.github.start_runner(runner, busy=True)
        self.engine.on_job_started(job.scale_set, job.id, runner, job.hint)

    def complete(self, job: Job) -> None:
        job.done_at = self.clock.now()
        self.github.finish_runner(job.runner)
        found = self.machine(job.runner)
        if found is not None:  # the ephemeral runner exits: its machine stops
            self.providers[found[0]].set_state(job.runner, MachineState.STOPPED)
        self.engine.on_job_completed(job.scale_set, job.id, job.runner, job.conclusion, job.hint)

    # ------------------------------------------------------------------ time

    def next_event(self) -> float:
        now = self.clock.now()
        for provider in self.providers.values():
            for machine in provider.machines:
                self.seen.setdefault(machine.name, now)
        times = [self.next_pass]
        if self.arrivals:
            times.append(self.arrivals[0][0])
        for job in self.jobs.values():
            if job.started_at is not None and job.done_at is None:
                times.append(job.started_at + job.duration)
        for runner in self.github.runners.values():
            if not runner.online and runner.name in self.seen:
                times.append(self.seen[runner.name] + self.boot)
        wake = self.clock.next_wakeup()
        if wake is not None:
            times.append(wake)
        later = [t for t in times if t > now]
        return min(later) if later else now + self.config.timing.reconcile_interval

    async def run_for(self, seconds: float) -> None:
        """Event by event until ``seconds`` of virtual time have passed, checking every step."""
        end = self.clock.now() + seconds
        while True:
            at = min(self.next_event(), end)
            self.clock.set(at)
            await self.settle()
            while self.arrivals and self.arrivals[0][0] <= at:
                _, _, scale_set, duration = heapq.heappop(self.arrivals)
                await self.queue(scale_set, 1, duration)
            await self.github_acts()
            if at >= self.next_pass:
                await self.reconcile()
                await self.github_acts()
            self.check()
            if at >= end:
                return

    async def run_until_done(self, limit: float = 6 * 3600.0) -> None:
        """Until every job has completed and nothing is left to delete (at most ``limit``)."""
        end = self.clock.now() + limit
        while self.clock.now() < end:
            await self.run_for(self.config.timing.reconcile_interval)
            if not self.arrivals and self.all_done() and self.tidy():
                return
        raise FleetBroken(self.seed, self.clock.now(), "the jobs did not all complete")

    # ------------------------------------------------------------------ what is true

    def all_done(self) -> bool:
        return all(j.done_at is not None for j in self.jobs.values())

    def tidy(self) -> bool:
        """No machine left on any provider beyond the runners the engine keeps."""
        live = {r.name for r in self.engine.runners}
        return all(m.name in live for p in self.providers.values() for m in p.machines) and all(
            r.state.value != "leaving" for r in self.engine.runners
        )

    def machines_on(self, provider: str) -> list[str]:
        return sorted(m.name for m in self.providers[provider].machines)

    def removals(self) -> dict[str, str]:
        """Why each runner went, from the event log (runner -> reason)."""
        return {
            e.name: str(e.attributes.get("reason"))
            for e in self.engine.events.recent()
            if e.action in ("removed", "lost")
        }

    def trace(self) -> list[tuple[object, ...]]:
        """What happened, without the runners' names (random per run): every event's time,
        action, provider, scale set and reason, and every job's start and end."""
        events = [
            (e.time, e.kind, e.action, e.provider, e.scale_set, e.attributes.get("reason"))
            for e in self.engine.events.recent()
        ]
        jobs = [(j.id, j.scale_set, j.started_at, j.done_at) for j in self.jobs.values()]
        return [*events, *jobs]

    def check(self) -> None:
        now = self.clock.now()
        limits = {p.name: p.max_runners for p in self.config.providers}
        owners: dict[str, str] = {}
        for name, provider in self.providers.items():
            machines = provider.machines
            if limits.get(name) and len(machines) > limits[name]:
                raise FleetBroken(
                    self.seed, now, f"{name} holds {len(machines)} > {limits[name]} machines"
                )
            for machine in machines:
                if machine.name in owners:
                    raise FleetBroken(
                        self.seed, now, f"{machine.name} on {owners[machine.name]} and {name}"
                    )
                owners[machine.name] = name
        for scale_set in self.config.scale_sets:
            live = len(self.engine.runners.live(scale_set.name))
            if live > scale_set.max_runners:
                raise FleetBroken(
                    self.seed, now, f"{scale_set.name} has {live} > {scale_set.max_runners} runners"
                )
        for name, provider in self.providers.items():
            for machine in provider.machines:
                if machine.labels.get(L.PROVIDER, name) != name:
                    raise FleetBroken(self.seed, now, f"{machine.name} labelled for another")
