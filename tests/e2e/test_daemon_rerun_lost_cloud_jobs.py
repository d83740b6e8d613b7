"""``rerun_lost_jobs`` on the clouds: a busy runner's GCP or AWS machine is deleted in the cloud
(the GCE fake's ``instances.delete``, moto's TerminateInstances), Rungar sees it gone, GitHub
fails its job, and Rungar re-runs the job on a new machine of the same cloud, where it
completes. Through the real daemon, the real plugins and the emulator (tests/e2e/cloud_world.py).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from rungar.testing.github_emulator.model import Job, JobState
from tests.e2e.cloud_world import AWS_CREDENTIALS, AwsCloud, Cloud, GcpCloud
from tests.e2e.daemon_world import DaemonWorld
from tests.waiting import until

CLOUDS: dict[str, Callable[[Path], Cloud]] = {"gcp": GcpCloud, "aws": AwsCloud}


def fleet(provider: dict[str, Any]) -> dict[str, Any]:
    return {
        "version": 1,
        "timing": {"reconcile_interval": "5s", "starting_sync_interval": "1s", "left_grace": "1s"},
        "providers": [provider],
        "scale_sets": [
            {
                "name": "linux",
                "labels": ["linux"],
                "max_runners": 2,
                "start_timeout": "60s",
                "rerun_lost_jobs": True,
                "providers": [provider["name"]],
            }
        ],
    }


@pytest.fixture(params=sorted(CLOUDS))
async def world(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[DaemonWorld, Cloud]]:
    for key, value in AWS_CREDENTIALS.items():
        monkeypatch.setenv(key, value)  # the booter's boto3, and the plugin's by inheritance
    root = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))
    cloud = CLOUDS[request.param](root)
    w = DaemonWorld(root, {})
    try:
        cloud.start()
        await w.start(fleet(cloud.provider(request.param)))
        yield w, cloud
    finally:
        await w.stop()
        cloud.stop()
        shutil.rmtree(root, ignore_errors=True)


def jobs(world: DaemonWorld) -> list[Job]:
    return list(world.emulator.state.jobs.values())


@pytest.mark.long
@pytest.mark.timeout(120)
async def test_a_job_lost_with_its_deleted_cloud_machine_is_re_run_on_a_new_one(
    world: tuple[DaemonWorld, Cloud],
) -> None:
    daemon, cloud = world
    await daemon.queue_job(labels=["linux"], name="build", duration=600)
    await daemon.wait_for(
        lambda _: any(j.state is JobState.RUNNING for j in jobs(daemon)), "the job running", 60
    )
    (job,) = jobs(daemon)
    runner = job.runner_name
    assert cloud.machines() == [runner], "the job runs on the cloud's machine"
    cloud.lose(runner)
    await daemon.reconcile()  # a pass now, rather than at the next interval
    await daemon.wait_for(
        lambda d: d is not None and all(r["name"] != runner for r in d["runners"]),
        "Rungar to see the machine gone",
        60,
    )
    async with httpx.AsyncClient() as http:  # GitHub stops hearing from the runner
        lost = await http.post(f"{daemon.emulator.base_url}/_fake/runners/{runner}/lost")
    assert lost.json()["jobId"] == job.job_id
    await daemon.wait_for(
        lambda _: len(jobs(daemon)) == 2 and jobs(daemon)[1].state is JobState.RUNNING,
        "the re-run job running",
        60,
    )
    again = jobs(daemon)[1]
    assert (again.run_id, again.attempt, again.spec.name) == (job.run_id, 2, "build")
    assert again.runner_name != runner
    assert cloud.machines() == [again.runner_name], "the re-run runs on a new machine there"
    async with httpx.AsyncClient() as http:
        done = await http.post(f"{daemon.emulator.base_url}/_fake/jobs/{again.job_id}/complete")
    assert done.status_code == 204
    assert [j.result for j in jobs(daemon)] == ["failed", "succeeded"]
    reruns = [r for r in daemon.emulator.state.requests if r["route"] == "R7"]
    assert len(reruns) == 1
    # Its runner's work done, the new machine is deleted in the cloud too.
    await until(lambda: cloud.machines() == [], "the re-run's machine deleted")
