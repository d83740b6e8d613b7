"""A host's queue entry ends when nothing it was refused for waits, wherever the jobs ran, through
the real stack: the GitHub emulator, ``rungar serve`` and two ``runnerd serve`` hosts with the
process runtime running ``rungar fake-runner`` (docs/runnerd.md, "Every figure, defined once").

host1 has one slot and comes first; a burst of more jobs than that comes, so host1 refuses the
scale set and host2 runs the rest. Rungar tells host1 the queue as the jobs it was refused for
leave it, so within 10 s of the burst's last job starting host1 lists nothing waiting, though no
job ran there after its refusal.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.daemon_world import DaemonWorld
from tests.e2e.test_runnerd_job_times import LABEL, runnerd_toml, until
from tests.e2e.test_runnerd_learning import Host, eventually

MIB = 1024**2
BURST = 4
JOB_SECONDS = 4.0


def host_at(root: Path, slots: int) -> Host:
    root.mkdir()
    host = Host(root)
    host.config.write_text(runnerd_toml(host.dir).replace("slots = 3", f"slots = {slots}"))
    return host


def fleet(first: Path, second: Path) -> dict[str, Any]:
    return {
        "version": 1,
        "timing": {
            "reconcile_interval": "5s",
            "backoff_first": "1s",
            "backoff_max": "1s",
            "left_grace": "2s",
        },
        "providers": [
            {"name": "host1", "type": "runnerd", "address": f"unix://{first}/provider.sock"},
            {"name": "host2", "type": "runnerd", "address": f"unix://{second}/provider.sock"},
        ],
        "scale_sets": [
            {
                "name": "ci",
                "labels": [LABEL],
                "max_runners": BURST,
                "placement": "pack",
                "start_timeout": "30s",
                "providers": [
                    {"name": "host1", "runner": {"profile": "ci"}},
                    {"name": "host2", "runner": {"profile": "ci"}},
                ],
            }
        ],
    }


@pytest.fixture
async def stack() -> AsyncIterator[tuple[DaemonWorld, Host, Host]]:
    root = Path(tempfile.mkdtemp(prefix="rungar-two-hosts-"))
    first, second = host_at(root / "a", 1), host_at(root / "b", BURST)
    world = DaemonWorld(root, {}, clock_factor=1)
    try:
        for host in (first, second):
            host.start()
        for host in (first, second):
            await host.wait_ready()
        await world.start(fleet(first.dir, second.dir))
        yield world, first, second
    finally:
        await world.stop()
        for host in (first, second):
            await host.stop()
        if not os.environ.get("KEEP"):
            shutil.rmtree(root, ignore_errors=True)


async def test_a_host_that_refused_a_burst_lists_nothing_once_its_jobs_ran_elsewhere(
    stack: tuple[DaemonWorld, Host, Host],
) -> None:
    world, first, second = stack
    await asyncio.gather(
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
    # host1 refused the scale set while its one slot ran a job.
    await until(lambda s: s["queue"] != [], "host1 to refuse the burst", first)
    await eventually(
        lambda: len(second.recorded()) >= BURST - 1, "host2 to run the rest", 120, second
    )
    # Every job has started (most of them ended) on one host or the other: nothing waits.
    await until(lambda s: s["queue"] == [], "host1's queue to empty", first, seconds=10)
    assert (await second.status())["queue"] == []
