"""``kill -9`` of ``rungar serve`` during a burst, then a restart: the next runner is placed
within seconds, because the restarted daemon deletes its own stale message session (recorded in
the state database) instead of waiting minutes for GitHub to expire it (docs/github.md).

The emulator keeps a session it has not heard from for 600 emulated seconds (a minute of real
time here): before, the restarted daemon met 409s for all of that minute and placed nothing.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from rungar.testing.fake_provider import GIB, FakeProvider
from rungar.testing.github_emulator.model import JobSpec
from tests.e2e.daemon_world import DaemonWorld
from tests.waiting import WAIT

RESTART_BUDGET = 5.0  # seconds from the restart to the next runner's machine


def fleet() -> dict[str, Any]:
    return {
        "version": 1,
        "timing": {"reconcile_interval": "5s", "left_grace": "2s"},
        "providers": [
            {"name": "host", "type": "runnerd", "runner": {"vcpus": 1, "memory": "256MiB"}}
        ],
        "scale_sets": [
            {
                "name": "linux",
                "labels": ["linux"],
                "max_runners": 10,
                "start_timeout": "30s",
                "providers": ["host"],
            }
        ],
    }


def burst(world: DaemonWorld, n: int) -> None:
    for i in range(n):
        # Long jobs: the runners of the first wave stay busy through the restart.
        world.emulator.state.queue_job(JobSpec(labels=("linux",), name=f"job-{i}", duration=900))


async def machines_at_least(world: DaemonWorld, n: int, seconds: float) -> float:
    """Seconds until the provider holds ``n`` machines; fails after ``seconds``."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    while len(world.machines()) < n:
        if loop.time() - start > seconds:
            raise AssertionError(f"{len(world.machines())} machines after {seconds} s, not {n}")
        await asyncio.sleep(0.05)
    return loop.time() - start


pytestmark = pytest.mark.long  # ~12 s; the quick, in-process variant is
# test_a_restart_deletes_its_own_stale_session_and_opens_at_once in tests/integration


@pytest.fixture
async def world() -> Any:
    root = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))  # short: unix socket paths
    w = DaemonWorld(root, {"host": FakeProvider("host", vcpus=64, memory_bytes=64 * GIB)})
    await w.start(fleet())
    yield w
    await w.stop()
    shutil.rmtree(root, ignore_errors=True)


async def test_a_kill_9_during_a_burst_places_the_next_runner_within_seconds_of_the_restart(
    world: DaemonWorld,
) -> None:
    await world.wait_for(lambda s: s and s["scale_sets"][0]["status"] == "LISTENING", "up", WAIT)
    burst(world, 3)
    await machines_at_least(world, 3, 20)
    world.kill_daemon()  # its message session stays alive on the emulator
    burst(world, 2)  # the burst goes on while the daemon is down
    # Watched from the restart on, not from when `rungar status` first answers (that command's
    # own start-up is no part of the daemon's).
    placed = asyncio.ensure_future(machines_at_least(world, 5, RESTART_BUDGET + 30))
    await world.start_daemon()
    took = await placed
    print(f"next runner {took:.2f} s after the restart")  # shown with -s
    assert took < RESTART_BUDGET, f"the next runner came {took:.1f} s after the restart"
    assert len(world.machines()) == 5, "the first wave was adopted, not made again"
    deleted = [r for r in world.emulator.state.requests if r["route"] == "A10"]
    assert deleted, "the stale session was deleted, not waited out"
