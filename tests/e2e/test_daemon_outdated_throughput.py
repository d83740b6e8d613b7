"""A fleet with one outdated host keeps its throughput: the same stream of jobs through the
real daemon, the emulator (GitHub's minimum 2.329.0) and four hosts served over gRPC, once with
every host's runner current and once with the first host's runner at 2.320.0, a version it does
not report, so GitHub refuses its runners when they connect. Placement spreads, so the outdated
host, emptied by each refusal, is always the one tried first unless it is skipped: its first
runners are refused, and from then on it is skipped.

The stream keeps about half the fleet's runners busy, so three hosts of four can carry it.
Throughput is jobs completed per second from the first job queued to the last one completed;
with one outdated host of four it stays at or above 95 % of the fleet's with none.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from rungar.testing.fake_provider import GIB, FakeProvider
from rungar.testing.github_emulator.model import JobState
from tests.e2e.daemon_world import DaemonWorld
from tests.waiting import until

pytestmark = pytest.mark.long

HOSTS = ("h1", "h2", "h3", "h4")
SLOTS = 4  # runners a host holds (4 vCPUs, 1 a runner)
JOBS = 40
DURATION = 60.0  # emulated seconds a job runs (6 s at the clock factor 10)
EVERY = 0.75  # real seconds between two jobs queued: 8 running at a time, of 16 runners


def fleet() -> dict[str, Any]:
    return {
        "version": 1,
        "timing": {"reconcile_interval": "5s", "starting_sync_interval": "1s"},
        "providers": [{"name": h, "type": "runnerd", "runner": {"vcpus": 1}} for h in HOSTS],
        "scale_sets": [
            {
                "name": "linux",
                "labels": ["linux"],
                "max_runners": SLOTS * len(HOSTS),
                "placement": "spread",
                "providers": list(HOSTS),
            }
        ],
    }


async def stream_throughput(outdated: bool) -> tuple[float, int]:
    """Jobs a second over the stream, and how many runners the first host was asked for."""
    root = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))  # short: unix socket paths
    world = DaemonWorld(
        root, {h: FakeProvider(h, vcpus=SLOTS, memory_bytes=16 * GIB) for h in HOSTS}
    )
    if outdated:
        world.providers["h1"].command = [
            sys.executable, "-m", "rungar.cli.fake_runner", "--runner-version", "2.320.0",
        ]  # fmt: skip
    try:
        await world.start(fleet())
        await world.wait_for(lambda s: bool(s and s["providers"]), "the daemon", 60)
        started = time.monotonic()
        for i in range(JOBS):
            # On a schedule, not after each other: a slow answer does not slow the stream.
            await asyncio.sleep(max(0.0, started + i * EVERY - time.monotonic()))
            await world.queue_job(labels=["linux"], name=f"job-{i}", duration=DURATION)

        def done() -> bool:
            jobs = world.emulator.state.jobs.values()
            return len(jobs) == JOBS and all(j.state is JobState.COMPLETED for j in jobs)

        await until(done, f"{JOBS} jobs completed", 300)
        took = time.monotonic() - started
        return JOBS / took, world.providers["h1"].fake.created
    finally:
        await world.stop()
        shutil.rmtree(root, ignore_errors=True)


async def test_a_fleet_with_one_outdated_host_of_four_keeps_95_percent_of_its_throughput() -> None:
    current, _ = await stream_throughput(outdated=False)
    with_outdated, asked_of_h1 = await stream_throughput(outdated=True)
    ratio = with_outdated / current
    print(
        f"throughput: {current:.3f} jobs/s with every host current, {with_outdated:.3f} with h1 "
        f"outdated ({ratio:.1%}); h1 was asked for {asked_of_h1} runners"
    )
    assert asked_of_h1 <= SLOTS, "h1 skipped after its first runners were refused"
    assert ratio >= 0.95
