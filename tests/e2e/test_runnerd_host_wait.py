"""A runner waits for a host's expected room instead of going to the cloud, through the real
processes: the GitHub emulator on a real-time clock, ``rungar serve``, ``runnerd serve`` with the
process runtime running ``rungar fake-runner``, and a priced cloud-like provider served over gRPC
with ``overflow: when_host_is_later`` (docs/placement.md, "Waiting for a host's expected room").

runnerd has one slot and a history in which the job ran 10 s each time. A first job takes the
slot; a second one comes while it runs: runnerd refuses it, saying when it expects room (the
first job's predicted end), Rungar keeps the runner off the cloud (``rungar status`` says it
waits for host1) and places it on host1 once the slot frees. Nothing is asked of the cloud.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from runnerd.admission.model import SUCCESS
from runnerd.history import History, JobEnd, JobKey, JobStart

from rungar.testing.fake_provider import GIB, FakeProvider
from tests.e2e.daemon_world import DaemonWorld
from tests.e2e.test_runnerd_job_times import LABEL, runnerd_toml, until
from tests.e2e.test_runnerd_learning import Host

MIB = 1024**2
JOB_SECONDS = 10.0
KEY = JobKey("ci", "octo-org/app", ".github/workflows/ci.yml", "build")

# About 30 s of real processes; tests/virtual/test_host_wait.py is the quick variant.
pytestmark = pytest.mark.long


def seed_history(host: Host) -> None:
    """Five past runs of the job, 10 s each, as runnerd would have recorded them."""
    history = History(host.dir / "history.db")
    now = time.time()
    rows = []
    for i in range(5):
        started = now - 3600 + 60 * i
        start = JobStart("old", "ci", "ci", 512 * MIB, 1.0, "caps", 512 * MIB, 1.0, "", None,
                         None, started)  # fmt: skip
        end = JobEnd(SUCCESS, 64 * MIB, 0.5, False, False, None, started + JOB_SECONDS)
        rows.append((start, KEY, end))
    history.insert_finished(rows)
    history.close()


def fleet(host: Path) -> dict[str, Any]:
    return {
        "version": 1,
        "timing": {
            "reconcile_interval": "30s",  # the wait, not a pass, brings the runner back
            "backoff_first": "1s",
            "backoff_max": "2s",
            "left_grace": "2s",
        },
        "providers": [
            {"name": "host1", "type": "runnerd", "address": f"unix://{host}/provider.sock"},
            {
                "name": "cloud",
                "type": "acme",
                "price_per_hour": 0.4,
                "overflow": "when_host_is_later",
                "typical_start": "60s",
                "overflow_margin": "30s",
            },
        ],
        "scale_sets": [
            {
                "name": "ci",
                "labels": [LABEL],
                "max_runners": 4,
                "placement": "pack",
                "start_timeout": "60s",
                "providers": [
                    {"name": "host1", "runner": {"profile": "ci"}},
                    {"name": "cloud", "runner": {"vcpus": 1, "memory": "512MiB"}},
                ],
            }
        ],
    }


@pytest.fixture
async def stack() -> AsyncIterator[tuple[DaemonWorld, Host]]:
    root = Path(tempfile.mkdtemp(prefix="rungar-host-wait-"))
    host = Host(root)
    host.config.write_text(runnerd_toml(host.dir).replace("slots = 3", "slots = 1"))
    seed_history(host)
    cloud = FakeProvider("cloud", vcpus=64, memory_bytes=256 * GIB)
    world = DaemonWorld(root, {"cloud": cloud}, clock_factor=1)
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


async def queue(world: DaemonWorld) -> None:
    await world.queue_job(
        labels=[LABEL],
        repository="octo-org/app",
        workflow="ci.yml",
        name="build",
        duration=JOB_SECONDS,
        memory_bytes=64 * MIB,
    )


def waits_for_host1(status: dict[str, Any] | None) -> bool:
    return bool(status) and any(
        s.get("waits_for_host") == "host1" and s["provider"] == "cloud"
        for s in status["skips"]  # type: ignore[index]
    )


async def test_a_runner_waits_for_runnerds_expected_room_and_runs_there_not_on_the_cloud(
    stack: tuple[DaemonWorld, Host],
) -> None:
    world, host = stack
    await world.wait_for(
        lambda s: s and all(x["status"] == "LISTENING" for x in s["scale_sets"]), "up", 60
    )
    await queue(world)
    await until(
        lambda s: any(r["job"] for r in s["runners"]), "the first job on the slot", host, 60
    )
    await queue(world)
    await world.wait_for(waits_for_host1, "the runner to wait for host1", 30)
    shown = await world.rungar("status")
    assert "ci's runner is not sent to cloud: waits for host1: room expected in" in shown.stdout
    events = [e for e in world.log_lines() if e.get("event") == "scale_set.waits_for_host"]
    assert events, "the wait is logged"

    first = {r["name"] for r in (await host.status())["runners"]}

    def second_on_host1(status: dict[str, Any]) -> bool:
        ran = {row["runner"] for row in host.recorded()} - {"old"}
        return bool(({r["name"] for r in status["runners"]} | ran) - first)

    await until(second_on_host1, "the second job's runner on host1", host, 60)
    assert world.providers["cloud"].fake.calls["create"] == 0, "nothing asked of the cloud"
