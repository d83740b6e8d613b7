"""The daemon as a user drives it (issue 4, item 9): ``rungar serve`` in its own process, two
providers over gRPC (one refusing FULL), GitHub jobs queued on the emulator, and ``rungar
status --json`` asserted at each step; then ``kill -9`` at random moments and a restart.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from rungar.model.machine import RefusalKind
from rungar.testing.fake_provider import GIB, FakeProvider
from rungar.testing.github_emulator.model import JobSpec, JobState
from tests.e2e.daemon_world import DaemonWorld

KILL_TRIALS = int(os.environ.get("RUNGAR_KILL_TRIALS", "2"))


def fleet() -> dict[str, Any]:
    return {
        "version": 1,
        "timing": {
            "reconcile_interval": "5s",
            "backoff_first": "2s",
            "backoff_max": "8s",
            "left_grace": "2s",
        },
        "providers": [
            {"name": "full-host", "type": "runnerd", "runner": {"vcpus": 2, "memory": "1GiB"}},
            {"name": "roomy-host", "type": "runnerd", "runner": {"vcpus": 2, "memory": "1GiB"}},
        ],
        "scale_sets": [
            {
                "name": "linux",
                "labels": ["linux"],
                "max_runners": 8,
                "placement": "pack",
                "start_timeout": "30s",
                "providers": ["full-host", "roomy-host"],
            },
        ],
    }


def providers() -> dict[str, FakeProvider]:
    full = FakeProvider("full-host", vcpus=64, memory_bytes=128 * GIB)
    full.refuse(RefusalKind.FULL, always=True, resource="memory", message="no memory left")
    return {
        "full-host": full,
        "roomy-host": FakeProvider("roomy-host", vcpus=64, memory_bytes=128 * GIB),
    }


def queue(world: DaemonWorld, n: int, duration: float) -> None:
    for i in range(n):
        world.emulator.state.queue_job(
            JobSpec(labels=("linux",), name=f"job-{i}", duration=duration, memory_bytes=8 << 20)
        )


def jobs_done(world: DaemonWorld) -> bool:
    return all(j.state is JobState.COMPLETED for j in world.emulator.state.jobs.values())


@pytest.fixture
async def world() -> Any:
    # A short path of its own: unix socket paths are limited to 103 characters.
    root = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))
    w = DaemonWorld(root, providers())
    await w.start(fleet())
    yield w
    await w.stop()
    shutil.rmtree(root, ignore_errors=True)


async def test_jobs_become_runners_on_the_provider_that_takes_them_and_are_cleaned_up(
    world: DaemonWorld,
) -> None:
    status = await world.wait_for(
        lambda s: s and s["scale_sets"][0]["status"] == "LISTENING", "LISTENING", 30
    )
    assert [p["status"] for p in status["providers"]] == ["OK", "OK"]
    assert status["runners"] == []

    queue(world, 3, duration=60)
    status = await world.wait_for(lambda s: s and len(s["runners"]) == 3, "three runners", 30)
    assert {r["provider"] for r in status["runners"]} == {"roomy-host"}
    assert any(
        skip["sentence"].startswith("linux found full-host full; tries it again in")
        for skip in status["skips"]
    ), status["skips"]
    assert world.providers["full-host"].fake.machines == [], "a refused create leaves nothing"

    await world.wait_for(lambda s: s and not s["runners"] and jobs_done(world), "jobs done", 60)
    assert world.machines() == [], "every machine is deleted once its job completes"
    human = await world.rungar("status")
    assert human.returncode == 0 and "Scale sets (1)" in human.stdout
    assert "linux found full-host full" in human.stdout or "full-host" in human.stdout


async def test_status_exits_non_zero_only_when_the_daemon_cannot_be_asked(
    world: DaemonWorld,
) -> None:
    assert (await world.rungar("status")).returncode == 0
    world.kill_daemon()
    done = await world.rungar("status")
    assert done.returncode == 1
    assert "cannot reach the rungar daemon" in done.stderr


async def test_kill_9_at_any_moment_leaves_no_duplicate_and_no_leaked_machine(
    world: DaemonWorld,
) -> None:
    rng = random.Random(int(os.environ.get("RUNGAR_KILL_SEED", "1")))
    await world.wait_for(lambda s: s and s["scale_sets"][0]["status"] == "LISTENING", "up", 30)
    for trial in range(KILL_TRIALS):
        queue(world, rng.randint(2, 5), duration=rng.uniform(20, 60))
        await asyncio.sleep(rng.uniform(0.1, 2.5))
        world.kill_daemon()
        before = world.machines()
        await world.start_daemon()
        await asyncio.sleep(6)  # one reconcile pass (5 s) after the restart
        status = await world.wait_for(lambda s: s is not None, "status", 10)
        tracked = {r["name"] for r in status["runners"]}
        leaked = set(world.machines()) - tracked
        assert not leaked, f"trial {trial}: machines nobody tracks: {leaked} (before {before})"
    await world.wait_for(lambda s: s and not s["runners"] and jobs_done(world), "all done", 90)
    assert world.machines() == []
    registrations = (
        list(world.emulator.state.runners.values())
        if hasattr(world.emulator.state, "runners")
        else []
    )
    assert all(not getattr(r, "busy", False) for r in registrations)
