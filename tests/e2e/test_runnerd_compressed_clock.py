"""runnerd keeps one clock when GitHub's runs 30 times as fast, through the real stack: the
GitHub emulator on a compressed clock, ``rungar serve``, ``runnerd serve`` with the process
runtime running ``rungar fake-runner`` (docs/runnerd.md, "Every figure, defined once").

A reserve runner waits; a burst of more jobs than slots comes. GitHub's waits are 30 times
runnerd's, so a queue time taken as GitHub's wait back from runnerd's clock would land minutes
before the burst (before the host existed), and every slot wait would grow from it. Each job's
queue time must be when the test queued it, by runnerd's clock, and its slot wait must be
what runnerd's refusals held it back (its whole wait when it waited for a slot, 0 when its
runner was admitted at once), within 3 s. Under GitHub's registration throttle, with a slot for
every job, no slot wait is recorded at all, and Sizing's p95 slot wait is 0.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from runnerd.figures import job_figures

from tests.e2e.daemon_world import DaemonWorld
from tests.e2e.test_runnerd_job_times import BURST, LABEL, SLOTS, fleet, runnerd_toml, until
from tests.e2e.test_runnerd_learning import Host, eventually

FACTOR = 30
MIB = 1024**2
JOB_SECONDS = 5.0  # real seconds; the emulator's job runs FACTOR times as long on its clock


@pytest.fixture
async def stack() -> AsyncIterator[tuple[DaemonWorld, Host]]:
    root = Path(tempfile.mkdtemp(prefix="rungar-fast-clock-"))
    host = Host(root)
    host.config.write_text(runnerd_toml(host.dir))
    world = DaemonWorld(root, {}, clock_factor=FACTOR)
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


async def test_on_a_compressed_github_clock_queue_times_and_slot_waits_stay_on_runnerds(
    stack: tuple[DaemonWorld, Host],
) -> None:
    world, host = stack
    await until(
        lambda s: any(r["state"] == "running" for r in s["runners"]), "a reserve runner", host
    )
    before = time.time()
    queued = await asyncio.gather(
        *(
            world.queue_job(
                labels=[LABEL],
                repository="octo-org/app",
                workflow="ci.yml",
                name="build",
                duration=JOB_SECONDS * FACTOR,
                memory_bytes=64 * MIB,
            )
            for _ in range(BURST)
        )
    )
    after = time.time()
    burst = {str(job["jobId"]) for job in queued}
    rows = await eventually(
        lambda: (found := host.recorded()) and len(found) >= BURST and found,
        "runnerd to record the burst",
        120,
        host,
    )
    assert {r["job_id"] for r in rows} == burst
    # 10 s after the burst nothing waits, and runnerd lists nothing.
    await until(lambda s: s["queue"] == [], "an empty queue", host, seconds=10)

    waited_for_a_slot = 0
    for row in rows:
        figures = job_figures(row)
        job_id = row["job_id"]
        # Queued when the test queued it, by runnerd's clock: not GitHub's wait (30 times
        # runnerd's) back from its start.
        assert before - 3.0 <= row["queued_at"] <= after + 3.0, (job_id, row["queued_at"], before)
        wait = row["job_started_at"] - before
        assert figures["wait"] is not None and abs(figures["wait"] - wait) <= 3.0 + (after - before)
        # Held back for a slot: its whole wait but the runner's boot; admitted at once: 0.
        slot_wait = figures["slot_wait"]
        assert slot_wait is not None and slot_wait <= max(0.0, row["started_at"] - before) + 3.0
        if row["started_at"] - after <= 1.0:  # its runner started as the burst came
            assert slot_wait <= 1.0, (job_id, slot_wait)
        waited_for_a_slot += slot_wait > 1.0
        # GitHub's own times are kept beside, on GitHub's clock: its wait is 30 times as long.
        truth = world.emulator.state.jobs[job_id]
        assert row["github_queued_at"] == pytest.approx(truth.created_at, abs=1.0)
    assert waited_for_a_slot >= BURST - SLOTS - 1, "the burst never waited for a slot"


# GitHub lets the JIT-config route through twice in any 6 s of its clock, and asks a client
# to retry after seconds of its own clock: a throttled registration waits seconds of runnerd's.
THROTTLE = {"jit_rate_per_minute": 20.0, "jit_rate_window": 6.0}
GITHUB_TIMING = {"registration_pace_window": 6.0, "registration_pace_relax": 2.0}


@pytest.fixture
async def throttled() -> AsyncIterator[tuple[DaemonWorld, Host]]:
    root = Path(tempfile.mkdtemp(prefix="rungar-throttled-"))
    host = Host(root)
    host.config.write_text(runnerd_toml(host.dir).replace("slots = 3", f"slots = {BURST}"))
    world = DaemonWorld(
        root, {}, clock_factor=FACTOR, github_timing=GITHUB_TIMING, emulator_options=THROTTLE
    )
    scale_sets = fleet(host.dir)
    scale_sets["scale_sets"][0]["min_runners"] = 0  # every runner is registered for a job
    try:
        host.start()
        await host.wait_ready()
        await world.start(scale_sets)
        yield world, host
    finally:
        await world.stop()
        await host.stop()
        if not os.environ.get("KEEP"):
            shutil.rmtree(root, ignore_errors=True)


# In make test-long for its length (about 18 s): GitHub's real-time throttle window; the
# compressed-clock test above runs the same stack by default.
@pytest.mark.long
async def test_under_a_registration_throttle_no_slot_wait_is_recorded_and_sizing_sees_none(
    throttled: tuple[DaemonWorld, Host], capsys: pytest.CaptureFixture[str]
) -> None:
    """The host has a slot for every job, so it refuses nothing: the jobs wait for GitHub's
    registration pace alone. Their queue time is GitHub's converted by the hints' offset (not
    when the throttled create first listed them here), their waits hold the registration's
    wait, and no slot wait is recorded, so Sizing's p95 slot wait is 0."""
    world, host = throttled
    before = time.time()
    queued = await asyncio.gather(
        *(
            world.queue_job(
                labels=[LABEL],
                repository="octo-org/app",
                workflow="ci.yml",
                name="build",
                duration=2.0 * FACTOR,
                memory_bytes=64 * MIB,
            )
            for _ in range(BURST)
        )
    )
    after = time.time()
    rows = await eventually(
        lambda: (found := host.recorded()) and len(found) >= BURST and found,
        "runnerd to record the burst",
        120,
        host,
    )
    assert {r["job_id"] for r in rows} == {str(job["jobId"]) for job in queued}
    waits = []
    for row in rows:
        figures = job_figures(row)
        assert before - 3.0 <= row["queued_at"] <= after + 3.0, (row["job_id"], row["queued_at"])
        assert figures["slot_wait"] == 0.0 and figures["host_wait"] == 0.0, row["job_id"]
        assert figures["wait"] is not None
        waits.append(figures["wait"])
    # The throttle held the last registrations back for seconds: their waits say so.
    assert max(waits) >= 4.0, waits
    (advice,) = host.runnerctl(capsys, "sizing")["profiles"]
    assert advice["wait_p95"] == 0.0
