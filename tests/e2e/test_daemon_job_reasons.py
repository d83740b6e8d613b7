"""Why a job waits, told on GitHub, through the real processes: a ``rungar serve`` daemon
authenticated as a GitHub App, the GitHub emulator, and a provider over gRPC whose one slot a
running job fills.

A job that starts at once gets no check run. Two jobs of one workflow run that find the host
full get one check run, ``rungar: linux``, on the run's head commit, naming the host's answer
in the words of ``rungar status``; once both have started it is concluded ``neutral``, "waited
…". The head commit is read once for the run, and the writes stay within the budget's share.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rungar.testing.fake_provider import GIB, FakeProvider
from rungar.testing.github_emulator.model import JobState, head_sha
from tests.e2e.daemon_world import DaemonWorld
from tests.e2e.test_token_leaks import APP, app_keys
from tests.waiting import WAIT, until

RUN = 4242  # the workflow run of the two jobs that wait
AFTER = 4.0  # seconds a job waits before its reason is written (compressed from 60)


def fleet() -> dict[str, Any]:
    return {
        "version": 1,
        "timing": {"reconcile_interval": "5s", "backoff_first": "2s", "left_grace": "1s"},
        "providers": [
            {"name": "host", "type": "runnerd", "runner": {"vcpus": 2, "memory": "2GiB"}},
        ],
        "scale_sets": [
            {"name": "linux", "labels": ["linux"], "max_runners": 4, "providers": ["host"]},
        ],
        "job_reasons": {"enabled": True, "after": AFTER, "update_every": "2s"},
    }


@pytest.fixture
async def world() -> AsyncIterator[DaemonWorld]:
    root = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))
    private, public = app_keys()
    w = DaemonWorld(
        root,
        # One runner's room: a second runner is refused FULL while the first one runs.
        {"host": FakeProvider("host", vcpus=2, memory_bytes=2 * GIB)},
        app_private_key=private,
        emulator_options={"apps": {APP: public}},
    )
    await w.start(fleet())
    yield w
    await w.stop()
    shutil.rmtree(root, ignore_errors=True)


def checks(world: DaemonWorld) -> list[dict[str, Any]]:
    return list(world.emulator.state.checks.check_runs.values())


def routes(world: DaemonWorld, name: str) -> list[dict[str, Any]]:
    return [r for r in world.emulator.state.requests if r["route"] == name]


def state_of(world: DaemonWorld, job_id: str) -> JobState:
    return world.emulator.state.jobs[job_id].state


async def test_jobs_that_wait_on_a_full_host_get_one_check_run_naming_its_answer(
    world: DaemonWorld,
) -> None:
    first = await world.queue_job(labels=["linux"], name="quick", duration=3000)
    await until(lambda: state_of(world, first["jobId"]) is JobState.RUNNING, "the first job")
    waiting = [
        await world.queue_job(labels=["linux"], name=f"wait-{n}", duration=10, run_id=RUN)
        for n in range(2)
    ]
    (check,) = await until(lambda: checks(world), "the check run of the waiting jobs")
    assert check["name"] == "rungar: linux"
    assert check["head_sha"] == head_sha("octo-org/app", RUN)
    assert check["status"] == "in_progress"
    # The host's answer, in the words of rungar status's skip line.
    assert "linux found host full" in check["output"]["summary"], check
    # The job that started at once has none: the only check run is on the waiting run's commit.
    assert all(c["head_sha"] == head_sha("octo-org/app", RUN) for c in checks(world))
    assert state_of(world, waiting[0]["jobId"]) is not JobState.RUNNING

    # The running job ends: the host has room, the waiting jobs start, the check run concludes.
    async with httpx.AsyncClient(timeout=WAIT) as http:
        done = await http.post(f"{world.emulator.base_url}/_fake/jobs/{first['jobId']}/complete")
    assert done.status_code == 204
    concluded = await until(
        lambda: [c for c in checks(world) if c["status"] == "completed"], "the conclusion"
    )
    assert concluded[0]["conclusion"] == "neutral"
    assert concluded[0]["output"]["summary"].startswith("waited "), concluded
    assert all(state_of(world, j["jobId"]) is not JobState.QUEUED for j in waiting)
    assert len(checks(world)) == 1, checks(world)  # both jobs of the run: one check run
    assert len(routes(world, "R8")) == 1  # the run's head commit, read once
    # Within 5 % of the emulator's 5000 an hour, and a tenth of that a minute.
    writes = routes(world, "R8") + routes(world, "R9") + routes(world, "R10")
    assert len(writes) <= 25, writes
