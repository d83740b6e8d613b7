"""Acceptance: the engine against the emulator, with faults injected everywhere: every job is run
exactly once and no surplus runner is registered."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rungar.clock import SystemClock
from rungar.config.model import ProviderConfig, ScaleSetsFile, Timing
from rungar.daemon.runloop import RunLoop
from rungar.engine.engine import Engine
from rungar.engine.report.events import EventLog
from rungar.model.machine import Created, CreateRequest, MachineState, Refusal
from rungar.store.sqlite import SqliteStore
from rungar.testing.fake_provider import GIB, FakeProvider
from rungar.testing.github_emulator import Fault, FaultKind, GitHubEmulator, JobSpec, JobState
from rungar.testing.github_emulator.harness import emulator, eventually, github, scale_set

JOBS = 30
MAX_RUNNERS = 6


class BootingProvider(FakeProvider):
    """A provider whose machines run the fake runner in-process: connect, take one job, finish
    it. Its machine then stops, as an ephemeral runner's does."""

    def __init__(self, emu: GitHubEmulator) -> None:
        super().__init__("p", vcpus=64, memory_bytes=128 * GIB)
        self.emu = emu
        self.tasks: set[asyncio.Task[None]] = set()
        self.booted: set[str] = set()

    async def create(self, request: CreateRequest) -> Created | Refusal:
        result = await super().create(request)
        if isinstance(result, Created) and request.runner_name not in self.booted:
            self.booted.add(request.runner_name)
            task = asyncio.create_task(self._runner(request.runner_name))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        return result

    async def _runner(self, name: str) -> None:
        state = self.emu.state
        runner = next(r for r in state.runners.values() if r.name == name)
        state.connect(runner)
        while (job := state.take_job(runner)) is None:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.02)
        state.complete(job, "Succeeded")
        self.set_state(name, MachineState.STOPPED)


async def test_every_job_runs_once_and_no_surplus_runner_is_registered_despite_faults(
    tmp_path: Path,
) -> None:
    """The daemon's own engine and run loop, listening through the real client (checked to fail
    with the demand doubled in ``Engine.on_demand``: the surplus runners never get a job)."""
    async with emulator(assignment_timeout=3600) as emu, github(emu) as gh:
        provider = BootingProvider(emu)
        config = scale_set(max_runners=MAX_RUNNERS)
        clock = SystemClock()
        engine = Engine(
            ScaleSetsFile((ProviderConfig("p", "fake"),), (config,), Timing()),
            {"p": provider},
            gh,
            clock=clock,
            store=SqliteStore(tmp_path / "state.db"),
            events=EventLog(clock),
            installation="gh-test",
        )
        plan = [
            Fault("A13", status=503, count=3, headers={"Retry-After": "1"}),
            Fault("MQ_GET", status=401),
            Fault("MQ_GET", kind=FaultKind.EMPTY, count=2),
            Fault("MQ_DELETE", status=502, count=2),
            Fault("A2", status=401),
            Fault("MQ_GET", kind=FaultKind.BOM),
        ]
        for fault in plan:
            emu.state.faults.add(fault)
        loop = RunLoop.of(engine)
        await loop.start()
        try:
            await eventually(lambda: config.name in gh.listeners, what="session")
            for i in range(JOBS):
                emu.state.queue_job(JobSpec(labels=("self-hosted", "rungar"), name=f"job-{i}"))
                if i == JOBS // 2:
                    emu.state.evict_session(engine.sets[config.name].id)
            await eventually(
                lambda: all(j.state is JobState.COMPLETED for j in emu.state.jobs.values()),
                timeout=120,  # the faults' retries wait real seconds; a busy machine adds more
                what="every job completed",
            )
            await eventually(lambda: not provider.tasks, what="every runner finished")
        finally:
            await loop.stop()
            await engine.drain_tasks()
            for task in provider.tasks:
                task.cancel()
    assert {j.result for j in emu.state.jobs.values()} == {"Succeeded"}
    assert all(j.reassignments == 0 for j in emu.state.jobs.values())
    assert emu.state.runners_created == JOBS  # one registration per job: no surplus
    assert provider.created == JOBS
    per_runner = gh.counter.total / emu.state.runners_created
    assert per_runner < 10, f"{per_runner:.1f} GitHub calls per runner"
