"""The fleet page and ``rungar usage`` on a real ``rungar serve``.

A job served on the priced provider is in ``rungar usage`` with its repository and cost, and
still there after the daemon restarted (the state database keeps it). A flood of idle
connections and held live views on the dashboard port leaves ``rungar status`` (the admin
socket), a whole reconcile pass and the page itself answering within a second, with the
daemon at the 1,024 open files systemd gives a unit.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rungar.rpc.admin_client import AdminClient
from rungar.testing.fake_provider import GIB, FakeProvider
from tests.e2e.daemon_world import DaemonWorld
from tests.e2e.test_daemon_flood import ANSWER_WITHIN, hold_connections
from tests.waiting import WAIT

pytestmark = pytest.mark.long


def fleet() -> dict[str, Any]:
    return {
        "version": 1,
        "timing": {"reconcile_interval": "5s"},
        "providers": [
            {
                "name": "cloud",
                "type": "runnerd",
                "runner": {"vcpus": 1, "memory": "1GiB"},
                "price_per_hour": 3.6,
            }
        ],
        "scale_sets": [
            {"name": "linux", "labels": ["linux"], "max_runners": 2, "providers": ["cloud"]}
        ],
    }


@pytest.fixture
async def world() -> AsyncIterator[DaemonWorld]:
    root = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))
    w = DaemonWorld(
        root,
        {"cloud": FakeProvider("cloud", vcpus=64, memory_bytes=64 * GIB)},
        dashboard=True,
        open_files=1024,
    )
    await w.start(fleet())
    yield w
    await w.stop()
    shutil.rmtree(root, ignore_errors=True)


async def test_a_served_job_is_in_rungar_usage_with_its_cost_and_stays_after_a_restart(
    world: DaemonWorld,
) -> None:
    await world.queue_job(
        labels=["linux"], repository="octo-org/payments", name="unit", duration=5,
        memory_bytes=8 << 20,
    )  # fmt: skip
    jobs = world.emulator.state.jobs
    await world.wait_for(
        lambda s: (
            jobs and all(j.state.name == "COMPLETED" for j in jobs.values()) and not s["runners"]
        ),
        "the job to be served and its runner gone",
        60,
    )
    world.kill_daemon()
    await world.start_daemon()
    answer = await world.rungar("usage", "--by", "repository", "--json")
    assert answer.returncode == 0, answer.stderr
    [group] = json.loads(answer.stdout)["groups"]
    assert (group["key"], group["jobs"], group["conclusions"]) == (
        "octo-org/payments",
        1,
        {"succeeded": 1},
    )
    assert group["runner_seconds"] > 0 and group["cost"] == pytest.approx(
        group["runner_seconds"] / 1000, abs=0.01
    )  # 3.6 per hour is 0.001 per second
    table = await world.rungar("usage", "--by", "provider")
    assert table.stdout.splitlines()[2].split()[0] == "cloud"


async def test_a_flood_on_the_dashboard_port_leaves_status_reconcile_and_the_page_answering(
    world: DaemonWorld,
) -> None:
    await world.wait_for(lambda s: s and s["scale_sets"], "the scale set", WAIT)
    held = await asyncio.to_thread(hold_connections, world.dashboard_port, 2000)
    streams: list[Any] = []
    try:
        async with httpx.AsyncClient(base_url=world.dashboard_url, timeout=WAIT) as viewer:
            for _ in range(16):  # every live view the page allows by default, held open
                request = viewer.build_request("GET", "/api/stream")
                streams.append(await viewer.send(request, stream=True))
            for _ in range(3):  # more than once: not a lucky first slot
                async with AdminClient(world.socket) as admin:
                    status = await asyncio.wait_for(admin.status(), ANSWER_WITHIN)
                    passed = await asyncio.wait_for(admin.reconcile([]), ANSWER_WITHIN)
                assert status["scale_sets"][0]["name"] == "linux" and passed
                async with httpx.AsyncClient(timeout=ANSWER_WITHIN) as client:
                    page = await client.get(world.dashboard_url + "api/status")
                assert page.json()["scale_sets"][0]["name"] == "linux"
    finally:
        for stream in streams:
            await stream.aclose()
        for sock in held:
            sock.close()
