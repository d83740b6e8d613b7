"""Acceptance: against the emulator, with faults injected everywhere, every job is run exactly once
and no surplus runner is registered (issue 5, "Done when")."""

from __future__ import annotations

import asyncio

from rungar.github.interface import Demand, JobEvent, JobEventKind
from rungar.testing.github_emulator import Fault, FaultKind, GitHubEmulator, JobSpec, JobState
from rungar.testing.github_emulator.harness import (
    emulator,
    eventually,
    github,
    running_listener,
    scale_set,
)

JOBS = 30
MAX_RUNNERS = 6


class MiniScaler:
    """desired = min(max_runners, assigned); one registration per missing runner.

    A runner counts as live until its ``JobCompleted`` is seen: statistics are never older than
    the events delivered with them, so a finished runner is not replaced on stale numbers.
    """

    def __init__(self, emu: GitHubEmulator, gh: object) -> None:
        self.emu, self.gh = emu, gh
        self.live: set[str] = set()
        self.created = 0
        self.tasks: set[asyncio.Task[None]] = set()
        self._lock = asyncio.Lock()

    async def on_demand(self, demand: Demand) -> None:
        async with self._lock:
            missing = min(MAX_RUNNERS, demand.assigned) - len(self.live)
            for _ in range(max(0, missing)):
                self.created += 1
                name = f"linux-{self.created}"
                # why the ignore[attr-defined] below: the scaler is handed the emulator's client
                runner_id, _ = await self.gh.generate_jit_config(demand.scale_set_id, name)  # type: ignore[attr-defined]
                self.live.add(name)
                task = asyncio.create_task(self._runner(runner_id, name))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)

    async def on_job(self, event: JobEvent) -> None:
        if event.kind is JobEventKind.COMPLETED and event.runner_name:
            self.live.discard(event.runner_name)

    async def _runner(self, runner_id: int, name: str) -> None:
        """What the fake runner does, in-process: connect, take one job, finish it."""
        state = self.emu.state
        runner = state.runners[runner_id]
        state.connect(runner)
        while (job := state.take_job(runner)) is None:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.02)
        state.complete(job, "Succeeded")


async def test_every_job_runs_once_and_no_surplus_runner_is_registered_despite_faults() -> None:
    async with emulator(assignment_timeout=3600) as emu, github(emu) as gh:
        scaler = MiniScaler(emu, gh)
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
        # why the ignore[arg-type] below: a scaler of the test's own, not an Engine
        async with running_listener(gh, scale_set(max_runners=MAX_RUNNERS), scaler) as lis:  # type: ignore[arg-type]
            await eventually(lambda: lis.last_demand is not None, what="session")
            for i in range(JOBS):
                emu.state.queue_job(JobSpec(labels=("self-hosted", "rungar"), name=f"job-{i}"))
                if i == JOBS // 2:
                    emu.state.evict_session(lis.scale_set_id)
            await eventually(
                lambda: all(j.state is JobState.COMPLETED for j in emu.state.jobs.values()),
                timeout=30,
                what="every job completed",
            )
            await eventually(lambda: not scaler.tasks, what="every runner finished")
    assert {j.result for j in emu.state.jobs.values()} == {"Succeeded"}
    assert all(j.reassignments == 0 for j in emu.state.jobs.values())
    assert emu.state.runners_created == JOBS  # one registration per job: no surplus
    assert not emu.state.runners  # every ephemeral runner is gone
    per_runner = gh.counter.total / emu.state.runners_created
    assert per_runner < 10, f"{per_runner:.1f} GitHub calls per runner"
