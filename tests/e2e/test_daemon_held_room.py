"""Room that opens on a held host goes to its holder at once, through the real processes: a
``rungar serve`` daemon, the GitHub emulator, and a provider over gRPC whose machines run real
fake runners.

Two small runners fill the host; a large job of a priority-10 scale set finds it full and holds
it. When the last small job ends and its machine is deleted, the large runner's Create reaches
the provider within 1 s — not after its 20 s backoff or the next 30 s reconcile pass.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rungar.model.machine import Created, CreateRequest, Refusal, Removal
from rungar.testing.fake_provider import GIB, FakeProvider
from rungar.testing.github_emulator.model import JobSpec
from tests.e2e.daemon_world import DaemonWorld

SMALL = {"vcpus": 2, "memory": "2GiB"}
LARGE = {"vcpus": 4, "memory": "4GiB"}


def fleet() -> dict[str, Any]:
    def scale_set(name: str, runner: dict[str, Any], priority: int) -> dict[str, Any]:
        return {
            "name": name,
            "labels": [name],
            "max_runners": 2,
            "priority": priority,
            "start_timeout": "30s",
            "providers": [{"name": "host", "runner": runner}],
        }

    return {
        "version": 1,
        # The backoff and the pass are long: only room opening can explain a quick Create.
        "timing": {"reconcile_interval": "30s", "backoff_first": "20s", "left_grace": "2s"},
        "providers": [{"name": "host", "type": "runnerd"}],
        "scale_sets": [scale_set("small", SMALL, 0), scale_set("large", LARGE, 10)],
    }


class Calls:
    """Every Create and Delete the provider receives, with the test's monotonic time."""

    def __init__(self, world: DaemonWorld) -> None:
        self.seen: list[tuple[float, str, str, bool]] = []  # at, call, runner, created
        provider = world.providers["host"]
        create, delete = provider.create, provider.delete

        async def recorded_create(request: CreateRequest) -> Created | Refusal:
            at = time.monotonic()
            result = await create(request)
            self.seen.append((at, "create", request.runner_name, isinstance(result, Created)))
            return result

        async def recorded_delete(name: str, removal: Removal | None = None) -> None:
            await delete(name, removal)
            self.seen.append((time.monotonic(), "delete", name, True))

        provider.create = recorded_create  # type: ignore[method-assign]  # recording wrapper
        provider.delete = recorded_delete  # type: ignore[method-assign]  # recording wrapper


async def until(check: Callable[[], bool], what: str, seconds: float) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while not check():
        if loop.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


# About 20 s of real processes; tests/virtual/test_held_room.py is the quick variant.
pytestmark = pytest.mark.long


@pytest.fixture
async def world() -> Any:
    root = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))  # short: unix socket paths
    w = DaemonWorld(root, {"host": FakeProvider("host", vcpus=4, memory_bytes=16 * GIB)})
    await w.start(fleet())
    yield w
    await w.stop()
    shutil.rmtree(root, ignore_errors=True)


async def test_the_holders_create_reaches_the_provider_within_a_second_of_the_room_opening(
    world: DaemonWorld,
) -> None:
    calls = Calls(world)
    await world.wait_for(
        lambda s: s and all(x["status"] == "LISTENING" for x in s["scale_sets"]), "up", 30
    )
    for duration in (60.0, 120.0):  # emulated seconds: 6 s and 12 s of real time
        world.emulator.state.queue_job(JobSpec(labels=("small",), duration=duration))
    await until(lambda: len(world.machines()) == 2, "two small machines", 60)
    world.emulator.state.queue_job(JobSpec(labels=("large",), duration=30.0))

    def held(status: dict[str, Any] | None) -> bool:
        return bool(status) and any(
            p["name"] == "host" and p.get("hold")
            for p in status["providers"]  # type: ignore[index]
        )

    await world.wait_for(held, "the host held for the large scale set", 60)

    def large_created() -> bool:
        return any(c == "create" and r.startswith("large") and ok for _, c, r, ok in calls.seen)

    await until(large_created, "the large runner's machine", 90)
    created_at = next(
        at for at, c, r, ok in calls.seen if c == "create" and r.startswith("large") and ok
    )
    deleted = [at for at, c, r, _ in calls.seen if c == "delete" and r.startswith("small")]
    assert deleted, "the small runners' machines were deleted"
    last_room = max(at for at in deleted if at <= created_at)
    assert created_at - last_room < 1.0, calls.seen
