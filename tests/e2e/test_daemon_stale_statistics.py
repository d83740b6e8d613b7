"""GitHub's assigned count stuck above its jobs: ``rungar serve`` notices, says so, and scales
to the jobs it was sent, with no operator.

The emulator keeps every scale set's ``TotalAssignedJobs`` 6 above the jobs that exist (as
GitHub's can for hours after an incident). The daemon first creates runners for the count, they
sit idle, and once ``stale_statistics_after`` passed it counts the jobs GitHub sent instead:
the surplus goes, ``rungar status`` and an event say why, real jobs still run, and a count GitHub
corrects is believed again.
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rungar.testing.fake_provider import GIB, FakeProvider
from rungar.testing.github_emulator.model import JobState
from tests.e2e.daemon_world import DaemonWorld
from tests.waiting import WAIT

PHANTOM = 6
JOBS = 3


def fleet() -> dict[str, Any]:
    return {
        "version": 1,
        "timing": {
            "reconcile_interval": "5s",
            "starting_sync_interval": "1s",
            "left_grace": "1s",
            "stale_statistics_after": "3s",
        },
        "providers": [
            {"name": "host", "type": "runnerd", "runner": {"vcpus": 1, "memory": "1GiB"}},
        ],
        "scale_sets": [
            {"name": "linux", "labels": ["linux"], "max_runners": 20, "providers": ["host"]},
        ],
    }


@pytest.fixture
async def world() -> AsyncIterator[DaemonWorld]:
    root = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))
    w = DaemonWorld(
        root,
        {"host": FakeProvider("host", vcpus=64, memory_bytes=128 * GIB)},
        emulator_options={"stale_assigned_jobs": PHANTOM},
    )
    await w.start(fleet())
    yield w
    await w.stop()
    shutil.rmtree(root, ignore_errors=True)


def scale_set(status: dict[str, Any] | None) -> dict[str, Any]:
    assert status is not None
    found: dict[str, Any] = status["scale_sets"][0]
    return found


def events(world: DaemonWorld, action: str) -> list[dict[str, Any]]:
    """The attributes of the scale set's events of ``action``, oldest first."""
    path = world.root / "state" / "events.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    found = [json.loads(line) for line in lines]
    return [e["attributes"] for e in found if e["kind"] == "scale_set" and e["action"] == action]


# In make test-long for its length (about 25 s); the judgement itself is held by
# tests/unit/test_stale_statistics.py in the default run.
@pytest.mark.long
async def test_a_stale_assigned_count_is_noticed_said_and_scaled_back_to_the_jobs_sent(
    world: DaemonWorld,
) -> None:
    # The count is believed first: runners for 6 jobs that do not exist.
    await world.wait_for(
        lambda s: s and scale_set(s)["runners"] >= PHANTOM, "runners for GitHub's count", WAIT
    )
    # They sit idle; the count is judged stale and scaling counts what GitHub sent (none).
    status = await world.wait_for(
        lambda s: s and scale_set(s)["statistics"] is not None, "the count judged stale", 2 * WAIT
    )
    statistics = scale_set(status)["statistics"]
    assert statistics["reported"] == PHANTOM and statistics["counted"] == 0
    assert "GitHub counts 6 jobs assigned, but sent 0" in statistics["sentence"]
    await world.wait_for(
        lambda s: s and scale_set(s)["runners"] == 0, "the idle surplus removed", 2 * WAIT
    )
    # Gone from GitHub too: a runner still leaving could be handed a real job below, and the
    # job would wait for GitHub to give it back (the emulator's assignment timeout).
    await world.wait_for(
        lambda _: not world.emulator.state.runners, "the surplus registrations removed", WAIT
    )
    human = (await world.rungar("status")).stdout
    assert statistics["sentence"] in human
    assert [e["counted"] for e in events(world, "statistics_stale")] == [0]

    # Real jobs on top of the stale count are still served, without the phantom's runners.
    for n in range(JOBS):
        await world.queue_job(labels=["self-hosted", "linux"], name=f"real-{n}", duration=20)
    most = 0

    def done(s: dict[str, Any] | None) -> bool:
        nonlocal most
        if s is not None:
            most = max(most, scale_set(s)["runners"])
        states = [j.state for j in world.emulator.state.jobs.values()]
        return states.count(JobState.COMPLETED) == JOBS

    await world.wait_for(done, "the real jobs to complete", 3 * WAIT)
    assert most <= JOBS + max(2, math.ceil(0.1 * JOBS)), f"{most} runners for {JOBS} jobs"

    # GitHub corrects its count: believed again, and said so.
    async with httpx.AsyncClient(timeout=WAIT) as client:
        (scale_set_id,) = world.emulator.state.scale_sets
        stale = f"{world.emulator.base_url}/_fake/scalesets/{scale_set_id}/stale"
        (await client.post(stale, json={"assigned": 0})).raise_for_status()
    await world.queue_job(labels=["self-hosted", "linux"], name="after", duration=5)
    await world.wait_for(
        lambda s: s and scale_set(s)["statistics"] is None, "the count believed again", 2 * WAIT
    )
    assert [e["counted"] for e in events(world, "statistics_believed")]
