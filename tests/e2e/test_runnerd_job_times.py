"""runnerd's job history tells the truth about time, through the real stack: the GitHub emulator
on a real-time clock, ``rungar serve``, ``runnerd serve`` with the process runtime running
``rungar fake-runner`` (docs/runnerd.md, "Every figure, defined once").

A reserve runner (``min_runners: 1``) waits; a burst of more jobs than slots comes, so some wait
for a slot while the host refuses; a quiet spell follows, in which runnerd must report nothing
waiting; then one job comes that the idle reserve runner takes. Every job's wait, slot wait and
duration in runnerd's history must then agree with the emulator's own timeline (queued, taken,
finished) within 3 s or 25 %, and the reserve runner's idle time must be reported apart, not as
its job's run time.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from runnerd.figures import job_figures

from tests.e2e.daemon_world import DaemonWorld
from tests.e2e.test_runnerd_learning import Host, eventually

MIB = 1024**2
LABEL = "e2e-times"
SLOTS = 3
BURST = 6
JOB_SECONDS = 6.0
QUIET_SECONDS = 8.0


def runnerd_toml(host: Path) -> str:
    python = json.dumps(sys.executable)
    return f"""
[host]
slice = "rungar-e2e-{uuid.uuid4().hex[:8]}.slice"
memory_max = "8G"
runtime = "process"
state_dir = "{host}"
disk_reserve = "64M"
disk_per_runner = "16M"
sample_interval = "0.2s"
exit_grace = "3s"

[profiles.ci]
command = [{python}, "-m", "rungar.cli.fake_runner"]
cpus = 1
memory = "512M"
slots = {SLOTS}
"""


def fleet(host: Path) -> dict[str, Any]:
    return {
        "version": 1,
        "timing": {
            "reconcile_interval": "5s",
            "backoff_first": "1s",
            "backoff_max": "1s",
            "left_grace": "2s",
        },
        "providers": [
            {"name": "host1", "type": "runnerd", "address": f"unix://{host}/provider.sock"}
        ],
        "scale_sets": [
            {
                "name": "ci",
                "labels": [LABEL],
                "min_runners": 1,
                "max_runners": BURST + 1,
                "start_timeout": "30s",
                "providers": [{"name": "host1", "runner": {"profile": "ci"}}],
            }
        ],
    }


@pytest.fixture
async def stack() -> AsyncIterator[tuple[DaemonWorld, Host]]:
    root = Path(tempfile.mkdtemp(prefix="rungar-times-"))
    host = Host(root)
    host.config.write_text(runnerd_toml(host.dir))
    world = DaemonWorld(root, {}, clock_factor=1)
    try:
        host.start()
        await host.wait_ready()
        await world.start(fleet(host.dir))
        yield world, host
    finally:
        await world.stop()
        await host.stop()
        if not os.environ.get("KEEP"):
            shutil.rmtree(root, ignore_errors=True)


async def until(check: Any, what: str, host: Host, seconds: float = 60) -> None:
    """Ask runnerd's status until ``check`` holds of it."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while loop.time() < end:
        if check(await host.status()):
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}; runnerd's log ends: {host.log()}")


def close(measured: float | None, truth: float, what: str) -> None:
    assert measured is not None, what
    assert abs(measured - truth) <= max(3.0, 0.25 * truth), (what, measured, truth)


# In make test-long for its length (about 28 s of jobs on a real-time clock); runnerd's
# record of each job through the same stack runs by default in test_runnerd_learning.py.
@pytest.mark.long
async def test_every_jobs_wait_and_run_time_agree_with_githubs_timeline_and_idle_is_apart(
    stack: tuple[DaemonWorld, Host], capsys: pytest.CaptureFixture[str]
) -> None:
    world, host = stack
    # The reserve runner: running, waiting for a job.
    await until(
        lambda s: any(r["state"] == "running" for r in s["runners"]), "a reserve runner", host
    )
    # All at once: queued one after another on a busy machine, the last could come after the
    # first had finished, and none would wait for a slot.
    queued = await asyncio.gather(
        *(
            world.queue_job(
                labels=[LABEL],
                repository="octo-org/app",
                workflow="ci.yml",
                name="build",
                duration=JOB_SECONDS,
                memory_bytes=64 * MIB,
            )
            for _ in range(BURST)
        )
    )
    burst = [str(job["jobId"]) for job in queued]
    await eventually(
        lambda: len(host.recorded()) >= BURST, "runnerd to record the burst", 120, host
    )
    # The quiet spell: nothing waits, and runnerd says so.
    await until(lambda s: s["queue"] == [], "an empty queue", host)
    loop = asyncio.get_running_loop()
    quiet_until = loop.time() + QUIET_SECONDS
    while loop.time() < quiet_until:
        assert (await host.status())["queue"] == [], "a queue entry while nothing waits"
        await asyncio.sleep(0.5)
    # The reserve runner, idle through the quiet spell, takes the next job.
    late = await world.queue_job(
        labels=[LABEL], repository="octo-org/app", workflow="ci.yml", name="build",
        duration=JOB_SECONDS, memory_bytes=64 * MIB,
    )  # fmt: skip
    late_id = str(late["jobId"])
    rows = await eventually(
        lambda: (found := host.recorded()) and len(found) >= BURST + 1 and found,
        "runnerd to record the late job",
        60,
        host,
    )
    assert (await host.status())["queue"] == []

    github = world.emulator.state.jobs
    by_id = {r["job_id"]: r for r in rows}
    assert set(by_id) == {*burst, late_id}
    waited_for_a_slot = 0
    for job_id, row in by_id.items():
        truth = github[job_id]
        figures = job_figures(row)
        gh_wait = truth.started_at - truth.created_at
        gh_run = truth.finished_at - truth.started_at
        close(figures["wait"], gh_wait, f"{job_id} wait")
        close(figures["duration"], gh_run, f"{job_id} duration")
        assert figures["slot_wait"] is not None
        # A job held back by the host waited for a slot; one that did not was charged nothing.
        close(figures["slot_wait"], gh_wait if gh_wait > 3.0 else 0.0, f"{job_id} slot wait")
        assert row["avg_cpu"] is None or row["avg_cpu"] < 1.5
        waited_for_a_slot += figures["slot_wait"] > 1.0
        # GitHub's own times are kept beside runnerd's.
        assert (
            row["github_queued_at"],
            row["github_started_at"],
            row["github_completed_at"],
        ) == pytest.approx((truth.created_at, truth.started_at, truth.finished_at), abs=1.0)
    assert waited_for_a_slot >= BURST - SLOTS - 1, "the burst never waited for a slot"
    # runnerctl jobs --json says the same figures, to the second.
    listed = {e["id"]: e for e in host.runnerctl(capsys, "jobs")}
    for job_id, row in by_id.items():
        figures = job_figures(row)
        entry = listed[job_id]
        assert (entry["slot_wait"], entry["duration"], entry["idle"], entry["wait"]) == (
            figures["slot_wait"], figures["duration"], figures["idle"], figures["wait"]
        )  # fmt: skip
        assert entry["clock"] == "runnerd"
    late_figures = job_figures(by_id[late_id])
    assert late_figures["idle"] is not None and late_figures["idle"] >= QUIET_SECONDS
    assert late_figures["slot_wait"] == 0.0
