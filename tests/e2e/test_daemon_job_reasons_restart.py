"""A job's reason on GitHub across a restart of ``rungar serve``, through the real processes: the
daemon authenticated as a GitHub App, the GitHub emulator, and a provider over gRPC whose one
slot a running job fills.

A job waits on the full host past the threshold and gets its check run. The daemon is killed
(``kill -9``) and started again: it did not hear that job assigned, yet it goes on updating the
same check run from the state database, and concludes it once the job starts. One check run in
all: none is created twice, none is left in progress.
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
from tests.github_app import app_keys
from tests.waiting import WAIT, until

pytestmark = pytest.mark.long  # two starts of the daemon: the engine's test holds it by default

RUN = 4343
APP = "Iv1.jobreasonsrestart"


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
        "job_reasons": {"enabled": True, "after": "2s", "update_every": "1s"},
    }


@pytest.fixture
async def world() -> AsyncIterator[DaemonWorld]:
    root = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))
    private, public = app_keys()
    w = DaemonWorld(
        root,
        {"host": FakeProvider("host", vcpus=2, memory_bytes=2 * GIB)},
        app_private_key=private,
        emulator_options={"apps": {APP: public}},
    )
    await w.start(fleet())
    yield w
    await w.stop()
    shutil.rmtree(root, ignore_errors=True)


def checks(world: DaemonWorld) -> list[dict[str, Any]]:
    return [
        c for c in world.emulator.state.checks.check_runs.values() if c["name"] == "rungar: linux"
    ]


async def test_a_restarted_daemon_updates_and_concludes_the_same_check_run(
    world: DaemonWorld,
) -> None:
    jobs = world.emulator.state.jobs
    first = await world.queue_job(labels=["linux"], name="first", duration=3000)
    await until(lambda: jobs[first["jobId"]].state is JobState.RUNNING, "the first job")
    waiting = await world.queue_job(labels=["linux"], name="waits", duration=10, run_id=RUN)
    (check,) = await until(
        lambda: [c for c in checks(world) if c["status"] == "in_progress"], "its check run"
    )
    assert check["head_sha"] == head_sha("octo-org/app", RUN)
    assert "linux found host full" in check["output"]["summary"], check

    world.kill_daemon()
    updates = check["updates"]
    await world.start_daemon()
    await until(lambda: check["updates"] > updates, "the same check run updated after the restart")
    assert checks(world) == [check] and check["status"] == "in_progress"

    async with httpx.AsyncClient(timeout=WAIT) as http:
        done = await http.post(f"{world.emulator.base_url}/_fake/jobs/{first['jobId']}/complete")
    assert done.status_code == 204
    await until(lambda: check["status"] == "completed", "the check run concluded")
    assert check["conclusion"] == "neutral"
    assert check["output"]["summary"].startswith("waited "), check
    assert jobs[waiting["jobId"]].started_at, "it concluded because the job started"
    assert checks(world) == [check]  # one check run for the job, across the restart
    reads = [r for r in world.emulator.state.requests if r["route"] == "R8"]
    assert len(reads) == 1  # the head commit was kept too, not read again
