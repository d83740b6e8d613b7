"""Why a job waits, told on GitHub, through the real processes: a ``rungar serve`` daemon
authenticated as a GitHub App, the GitHub emulator, and a provider over gRPC whose one slot a
running job fills.

A job that starts at once gets no check run. Two jobs of one workflow run that find the host
full get one check run, ``rungar: linux``, on the run's head commit, naming the host's answer
in the words of ``rungar status``; once both have started it is concluded ``neutral``, "waited
…". The head commit is read once for the run, and the writes stay within the budget's share.
A job whose runner is larger than the host (INVALID) has its run cancelled within its
``unservable.cancel_after`` plus a minute, its check run failed with the reason; the jobs
waiting on the full host, past the same deadline, are not.
"""

from __future__ import annotations

import shutil
import tempfile
import time
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

RUN = 4242  # the workflow run of the two jobs that wait
AFTER = 4.0  # seconds a job waits before its reason is written (compressed from 60)
CANCEL_AFTER = 3.0  # seconds a job no provider can serve waits before its run is cancelled
HUGE_RUN = 5151
APP = "Iv1.jobreasons"


def fleet() -> dict[str, Any]:
    return {
        "version": 1,
        "timing": {"reconcile_interval": "5s", "backoff_first": "2s", "left_grace": "1s"},
        "providers": [
            {"name": "host", "type": "runnerd", "runner": {"vcpus": 2, "memory": "2GiB"}},
        ],
        "scale_sets": [
            {
                "name": "linux",
                "labels": ["linux"],
                "max_runners": 4,
                "providers": ["host"],
                "unservable": {"cancel_after": CANCEL_AFTER},
            },
            {
                "name": "huge",
                "labels": ["huge"],
                "max_runners": 1,
                # More than the whole host: refused INVALID.
                "providers": [{"name": "host", "runner": {"vcpus": 8, "memory": "2GiB"}}],
                "unservable": {"cancel_after": CANCEL_AFTER},
            },
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


async def test_waiting_jobs_get_a_check_run_naming_the_hosts_answer_and_an_unservable_run_ends(
    world: DaemonWorld,
) -> None:
    first = await world.queue_job(labels=["linux"], name="quick", duration=3000)
    await until(lambda: state_of(world, first["jobId"]) is JobState.RUNNING, "the first job")
    waiting = [
        await world.queue_job(labels=["linux"], name=f"wait-{n}", duration=10, run_id=RUN)
        for n in range(2)
    ]
    huge = await world.queue_job(labels=["huge"], name="huge", duration=10, run_id=HUGE_RUN)
    queued_at = time.monotonic()

    # The job no provider can ever serve: its run is cancelled, its check run failed.
    cancelled = await until(
        lambda: world.emulator.state.checks.cancelled_runs, "the huge job's run cancelled"
    )
    assert time.monotonic() - queued_at < CANCEL_AFTER + 60
    assert [c["run_id"] for c in cancelled] == [HUGE_RUN]
    assert world.emulator.state.jobs[huge["jobId"]].result == "canceled"
    failed = await until(
        lambda: [c for c in checks(world) if c["name"] == "rungar: huge"], "its check run"
    )
    assert failed[0]["conclusion"] == "failure"
    assert failed[0]["head_sha"] == head_sha("octo-org/app", HUGE_RUN)
    assert "host refuses its runner as invalid" in failed[0]["output"]["summary"], failed

    (check,) = await until(
        lambda: [c for c in checks(world) if c["name"] == "rungar: linux"],
        "the check run of the waiting jobs",
    )
    assert check["head_sha"] == head_sha("octo-org/app", RUN)
    assert check["status"] == "in_progress"
    # The host's answer, in the words of rungar status's skip line.
    assert "linux found host full" in check["output"]["summary"], check
    # The job that started at once has none: the check runs are on the other runs' commits.
    heads = {head_sha("octo-org/app", RUN), head_sha("octo-org/app", HUGE_RUN)}
    assert {c["head_sha"] for c in checks(world)} == heads
    assert state_of(world, waiting[0]["jobId"]) is not JobState.RUNNING

    # The running job ends: the host has room, the waiting jobs start, the check run concludes.
    async with httpx.AsyncClient(timeout=WAIT) as http:
        done = await http.post(f"{world.emulator.base_url}/_fake/jobs/{first['jobId']}/complete")
    assert done.status_code == 204
    concluded = await until(
        lambda: [c for c in checks(world) if c["status"] == "completed" and c is check],
        "the conclusion",
    )
    assert concluded[0]["conclusion"] == "neutral"
    assert concluded[0]["output"]["summary"].startswith("waited "), concluded
    assert all(state_of(world, j["jobId"]) is not JobState.QUEUED for j in waiting)
    linux = [c for c in checks(world) if c["name"] == "rungar: linux"]
    assert len(linux) == 1, checks(world)  # both jobs of the run: one check run
    assert len(routes(world, "R8")) == 2  # each run's head commit, read once
    # Waiting on a full host past the same deadline, the run was not cancelled: its jobs ran.
    assert [c["run_id"] for c in world.emulator.state.checks.cancelled_runs] == [HUGE_RUN]
    for job in waiting:
        assert world.emulator.state.jobs[job["jobId"]].result != "canceled"
    # Within 5 % of the emulator's 5000 an hour, and a tenth of that a minute.
    writes = [r for n in ("R8", "R9", "R10", "R11", "R12") for r in routes(world, n)]
    assert len(writes) <= 25, writes
