"""``rerun_lost_jobs`` through the real daemon and the emulator: a busy runner's machine is
killed, GitHub fails its job, and Rungar re-runs the job once through the REST re-run route;
the job then runs again to success. A job that fails on its own is never re-run."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import httpx
import pytest

from rungar.testing.fake_provider import GIB, FakeProvider
from rungar.testing.github_emulator.model import JobState
from tests.e2e.daemon_world import DaemonWorld
from tests.waiting import until_awaited


def fleet() -> dict[str, Any]:
    return {
        "version": 1,
        "timing": {"reconcile_interval": "5s", "starting_sync_interval": "1s", "left_grace": "1s"},
        "providers": [
            {"name": "host", "type": "runnerd", "runner": {"vcpus": 2, "memory": "1GiB"}},
        ],
        "scale_sets": [
            {
                "name": "linux",
                "labels": ["linux"],
                "max_runners": 4,
                "start_timeout": "60s",
                "rerun_lost_jobs": True,
                "providers": ["host"],
            }
        ],
    }


@pytest.fixture
async def world() -> Any:
    root = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))
    w = DaemonWorld(root, {"host": FakeProvider("host", vcpus=64, memory_bytes=128 * GIB)})
    await w.start(fleet())
    yield w
    await w.stop()
    shutil.rmtree(root, ignore_errors=True)


def jobs(world: DaemonWorld) -> list[Any]:
    return list(world.emulator.state.jobs.values())


def reruns(world: DaemonWorld) -> list[dict[str, Any]]:
    return [r for r in world.emulator.state.requests if r["route"] == "R7"]


async def test_a_job_lost_with_its_machine_is_run_again_once_and_booked_to_its_provider(
    world: DaemonWorld,
) -> None:
    queued = await world.queue_job(labels=["linux"], name="build", duration=600)
    await world.wait_for(
        lambda _: any(j.state is JobState.RUNNING for j in jobs(world)), "the job running", 60
    )
    (job,) = jobs(world)
    runner = job.runner_name
    # The machine dies under the job: the provider no longer has it ...
    await world.providers["host"].delete(runner)
    await world.wait_for(
        lambda d: d is not None and all(r["name"] != runner for r in d["runners"]),
        "Rungar to see the machine gone",
        60,
    )
    # ... and GitHub, no longer hearing from the runner, fails its job.
    async with httpx.AsyncClient() as http:
        lost = await http.post(f"{world.emulator.base_url}/_fake/runners/{runner}/lost")
    assert lost.json()["jobId"] == queued["jobId"]
    document = await world.wait_for(
        lambda d: d is not None and d["daemon"]["reruns"]["count"] == 1, "the re-run", 60
    )
    assert (
        "its runner " + runner + " was lost with its machine"
        in document["daemon"]["reruns"]["last"]
    )
    await world.wait_for(
        lambda _: len(jobs(world)) == 2 and jobs(world)[1].state is JobState.RUNNING,
        "the re-run job running",
        60,
    )
    again = jobs(world)[1]
    assert (again.run_id, again.attempt, again.spec.name) == (job.run_id, 2, "build")
    assert again.runner_name != runner
    async with httpx.AsyncClient() as http:
        done = await http.post(f"{world.emulator.base_url}/_fake/jobs/{again.job_id}/complete")
    assert done.status_code == 204
    assert [j.result for j in jobs(world)] == ["failed", "succeeded"]
    assert len(reruns(world)) == 1
    assert reruns(world)[0]["path"].endswith(f"/actions/jobs/{job.workflow_job_id}/rerun")
    events = [e for e in world.log_lines() if e.get("event") == "job.rerun"]
    assert len(events) == 1

    # Both runs are booked to the provider that held their machines: the lost one too, whose
    # runner was gone by the time GitHub failed its job.
    async def booked() -> dict[str, Any] | None:
        shown = await world.rungar("usage", "--by", "provider", "--json")
        usage = dict(json.loads(shown.stdout))
        return usage if usage["total"]["jobs"] == 2 else None

    usage = await until_awaited(booked, "both runs in rungar usage")
    assert usage is not None  # until_awaited returns only a true value
    assert [(g["key"], g["jobs"]) for g in usage["groups"]] == [("host", 2)], usage
    assert usage["groups"][0]["conclusions"] == {"failed": 1, "succeeded": 1}
    table = await world.rungar("usage", "--by", "provider")
    assert "(unknown)" not in table.stdout and "  host " in table.stdout, table.stdout


async def test_a_job_that_fails_on_its_own_is_never_re_run(world: DaemonWorld) -> None:
    await world.queue_job(labels=["linux"], name="test", duration=1, result="failed")
    await world.wait_for(
        lambda _: any(j.state is JobState.COMPLETED for j in jobs(world)), "the job failing", 60
    )
    (job,) = jobs(world)
    assert job.result == "failed"
    # A pass later, nothing was re-run: the runner that ran it was there to report it.
    await world.reconcile()
    await world.reconcile()
    assert reruns(world) == [] and len(jobs(world)) == 1
