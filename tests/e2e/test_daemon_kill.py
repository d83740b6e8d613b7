"""``kill -9`` of ``rungar serve``, then a restart: after one reconcile pass no runner has two
machines, and every machine and every GitHub registration the killed daemon left is tracked,
backed by a machine, or gone.

``make test`` kills the daemon three times mid-burst, each time while a create is in flight (a
runner registered on GitHub, its machine not made yet), and checks the state database the dead
daemon left: an intent for every machine and registration its runner table does not hold.
``make test-long`` also kills a daemon whose machines boot real fake runners at random moments,
checks every job then completes with nothing left behind, and runs the soak: 200 kills
(``RUNGAR_KILL_TRIALS``) during a 500-job burst (``RUNGAR_KILL_JOBS``), on machines that never
connect, so the daemon keeps creating, timing out and replacing runners while it is killed.
The in-process version, which crashes before or after every kind of outside call, is
tests/integration/test_engine_crash.py.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import tempfile
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from rungar.model.machine import RefusalKind
from rungar.store.sqlite import SqliteStore
from rungar.testing.fake_provider import GIB, FakeProvider
from rungar.testing.github_emulator.model import JobState
from tests.e2e.daemon_world import DaemonWorld
from tests.waiting import WAIT

SEED = int(os.environ.get("RUNGAR_KILL_SEED", "1"))
QUICK_KILLS = 3
POLL = 0.01  # how often the mid-burst test looks for a create in flight
SOAK_KILLS = int(os.environ.get("RUNGAR_KILL_TRIALS", "200"))
SOAK_JOBS = int(os.environ.get("RUNGAR_KILL_JOBS", "500"))


def fleet(max_runners: int) -> dict[str, Any]:
    return {
        "version": 1,
        "timing": {
            "reconcile_interval": "5s",
            "backoff_first": "2s",
            "backoff_max": "8s",
            "left_grace": "2s",
        },
        "providers": [
            {"name": "small-host", "type": "runnerd", "runner": {"vcpus": 2, "memory": "1GiB"}},
            {"name": "roomy-host", "type": "runnerd", "runner": {"vcpus": 2, "memory": "1GiB"}},
        ],
        "scale_sets": [
            {
                "name": "linux",
                "labels": ["linux"],
                "max_runners": max_runners,
                "placement": "pack",
                "start_timeout": "30s",
                "providers": ["small-host", "roomy-host"],
            },
        ],
    }


def providers() -> dict[str, FakeProvider]:
    small = FakeProvider("small-host", vcpus=16, memory_bytes=32 * GIB)
    small.refuse(RefusalKind.FULL, count=3, resource="memory", message="no memory left")
    return {
        "small-host": small,
        "roomy-host": FakeProvider("roomy-host", vcpus=64, memory_bytes=128 * GIB),
    }


async def queue(world: DaemonWorld, n: int, duration: float) -> None:
    """Queue through the emulator's control API: its state belongs to the emulator's thread."""
    for i in range(n):
        await world.queue_job(
            labels=["linux"], name=f"job-{i}", duration=duration, memory_bytes=8 << 20
        )


def jobs_done(world: DaemonWorld) -> bool:
    return all(j.state is JobState.COMPLETED for j in world.emulator.state.jobs.values())


async def make_world(
    boot_runners: bool, max_runners: int, create_latency: float = 0.0
) -> AsyncIterator[DaemonWorld]:
    # A short path of its own: unix socket paths are limited to 103 characters.
    root = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))
    fakes = providers()
    for fake in fakes.values():
        fake.latency = create_latency  # each call takes this long: creates overlap a kill
    world = DaemonWorld(root, fakes, boot_runners=boot_runners)
    await world.start(fleet(max_runners))
    try:
        yield world
    finally:
        await world.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
async def world() -> AsyncIterator[DaemonWorld]:
    async for w in make_world(boot_runners=True, max_runners=8):
        yield w


@pytest.fixture
async def burst_world() -> AsyncIterator[DaemonWorld]:
    async for w in make_world(boot_runners=False, max_runners=24, create_latency=0.3):
        yield w


@pytest.fixture
async def soak_world() -> AsyncIterator[DaemonWorld]:
    async for w in make_world(boot_runners=False, max_runners=40):
        yield w


async def kill_restart_and_check(world: DaemonWorld, rng: random.Random, trial: int) -> int:
    """Kill the daemon after a random moment, restart it, run one pass once it acts; the
    machines it left."""
    await asyncio.sleep(rng.uniform(0.05, 1.5))
    world.kill_daemon()
    left_behind = set(world.machines())
    await world.start_daemon()
    # It acts once it holds the lease: GitHub frees the killed daemon's sessions first.
    await world.wait_for(
        lambda s: s and s["daemon"]["lease"] and s["daemon"]["lease"]["role"] == "active",
        "the restarted daemon to hold the lease",
        30,
    )
    await world.reconcile()
    status = await world.status()
    assert status is not None
    now = world.machines()
    twice = [name for name, n in Counter(now).items() if n > 1]
    assert not twice, f"kill {trial}: runners with two machines: {twice}"
    tracked = {r["name"] for r in status["runners"]}
    leaked = (left_behind & set(now)) - tracked
    assert not leaked, f"kill {trial}: machines nobody tracks after one pass: {sorted(leaked)}"
    return len(left_behind)


@pytest.mark.long  # the in-process crash test reaches every outside call in make test
async def test_kill_9_at_random_moments_leaves_no_duplicate_and_no_leak(
    world: DaemonWorld,
) -> None:
    rng = random.Random(SEED)
    await world.wait_for(lambda s: s and s["scale_sets"][0]["status"] == "LISTENING", "up", WAIT)
    # Jobs of a minute of real time: the kills find their machines up.
    await queue(world, 4, duration=600)
    await world.wait_for(lambda s: s and s["runners"], "a runner", WAIT)
    machines_seen = 0
    for trial in range(QUICK_KILLS):
        machines_seen += await kill_restart_and_check(world, rng, trial)
    assert machines_seen > 0, "no kill found a machine up: the check checked nothing"


@pytest.mark.long
async def test_every_job_completes_after_kills_and_nothing_is_left_behind(
    world: DaemonWorld,
) -> None:
    """Jobs assigned to a killed daemon's session wait for it to expire (about a minute)."""
    rng = random.Random(SEED)
    await world.wait_for(lambda s: s and s["scale_sets"][0]["status"] == "LISTENING", "up", WAIT)
    for trial in range(QUICK_KILLS):
        await queue(world, rng.randint(2, 4), duration=rng.uniform(2, 6))
        await kill_restart_and_check(world, rng, trial)
    await world.wait_for(lambda s: s and not s["runners"] and jobs_done(world), "all done", 150)
    assert world.machines() == []
    busy = [r.name for r in world.emulator.state.runners.values() if r.busy]
    assert busy == [], f"registrations still busy with a job: {busy}"


@pytest.mark.long
@pytest.mark.timeout(3600)
async def test_200_kills_during_a_500_job_burst_leave_no_duplicate_and_no_leak(
    soak_world: DaemonWorld,
) -> None:
    world = soak_world
    rng = random.Random(SEED)
    await world.wait_for(lambda s: s and s["scale_sets"][0]["status"] == "LISTENING", "up", WAIT)
    await queue(world, SOAK_JOBS, duration=60)
    machines_seen = 0
    for trial in range(SOAK_KILLS):
        machines_seen += await kill_restart_and_check(world, rng, trial)
    # The soak meant something: the daemon was killed with machines up, again and again.
    assert machines_seen >= SOAK_KILLS, machines_seen


def registrations(world: DaemonWorld) -> set[str]:
    """The runners registered on GitHub (the emulator), by name."""
    return {r.name for r in dict(world.emulator.state.runners).values()}


async def kill_mid_create(world: DaemonWorld, trial: int) -> None:
    """Kill the daemon while a runner is registered on GitHub and its machine not made yet."""
    loop = asyncio.get_running_loop()
    end = loop.time() + 30
    while not registrations(world) - set(world.machines()):
        assert loop.time() < end, f"kill {trial}: no create was ever in flight"
        await asyncio.sleep(POLL)
    world.kill_daemon()


def unsettled_at_kill(world: DaemonWorld) -> list[str]:
    """What the dead daemon's state database does not account for: a machine or a registration
    neither in its runner table nor in a create intent (naming the machine's provider)."""
    store = SqliteStore(world.root / "state" / "state.db")
    try:
        kept = {r.name for r in store.kept_runners()}
        intents = {i.runner: i.provider for i in store.intents()}
    finally:
        store.close()
    problems = []
    for provider in world.providers.values():
        for machine in provider.fake.machines:
            name = machine.name
            if name not in kept and intents.get(name) != provider.fake.name:
                problems.append(f"machine {name} on {provider.fake.name}: no runner, no intent")
    for name in registrations(world) - set(world.machines()) - kept - set(intents):
        problems.append(f"registration {name}: no machine, no runner, no intent")
    return problems


async def test_kill_9_mid_burst_leaves_every_machine_and_registration_accounted_for(
    burst_world: DaemonWorld,
) -> None:
    world = burst_world
    await world.wait_for(lambda s: s and s["scale_sets"][0]["status"] == "LISTENING", "up", 30)
    for trial in range(QUICK_KILLS):
        await queue(world, 6, duration=600)
        await kill_mid_create(world, trial)
        left_machines, left_registrations = set(world.machines()), registrations(world)
        assert left_registrations - left_machines, "the kill came with no create in flight"
        assert unsettled_at_kill(world) == [], f"kill {trial}"
        await world.start_daemon()
        await world.wait_for(
            lambda s: s and s["daemon"]["lease"] and s["daemon"]["lease"]["role"] == "active",
            "the restarted daemon to hold the lease",
            30,
        )
        await world.reconcile()
        status = await world.status()
        assert status is not None
        now = world.machines()
        twice = [name for name, n in Counter(now).items() if n > 1]
        assert not twice, f"kill {trial}: runners with two machines: {twice}"
        tracked = {r["name"] for r in status["runners"]}
        leaked = (left_machines & set(now)) - tracked
        assert not leaked, f"kill {trial}: machines nobody tracks after one pass: {sorted(leaked)}"
        stray = (left_registrations & registrations(world)) - set(now)
        assert not stray, f"kill {trial}: registrations with no machine after a pass: {stray}"
