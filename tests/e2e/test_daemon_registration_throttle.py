"""GitHub's registration throttle against a running ``rungar serve`` (docs/github.md,
"Registration pace"): the emulator lets its JIT-config route through twice in any 6 s and
answers 429 with Retry-After past that.

- No host is blamed for GitHub's pace: no provider is reported failing or skipped.
  (tests/integration/test_engine_create_budget.py has a 429 whose Retry-After is longer than
  ``start_timeout``, on the engine's clock: the daemon's is the wall clock, and
  ``start_timeout`` is at least 30 s.)
- No runner is registered once the demand is gone: a queued create is dropped before it
  registers when its scale set no longer wants it.
- The learned pace relaxes once GitHub stops answering 429.
- ``rungar apply`` that removes a scale set with creates waiting drops them quietly.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from rungar.testing.fake_provider import GIB, FakeProvider
from tests.e2e.daemon_world import DaemonWorld
from tests.waiting import WAIT

# Twice in any 6 s.
THROTTLE = {"jit_rate_per_minute": 20.0, "jit_rate_window": 6.0}
GITHUB_TIMING = {"registration_pace_window": 6.0, "registration_pace_relax": 2.0}


def scale_set(name: str, label: str) -> dict[str, Any]:
    return {
        "name": name,
        "labels": [label],
        "max_runners": 10,
        "start_timeout": "30s",
        "providers": ["host1"],
    }


def fleet(*scale_sets: dict[str, Any]) -> dict[str, Any]:
    return {
        "version": 1,
        # A runner is given a minute to connect: only the registration's wait is under test.
        "timing": {"reconcile_interval": "5s", "never_connected_grace": "60s"},
        "providers": [
            {"name": "host1", "type": "runnerd", "runner": {"vcpus": 1, "memory": "256MiB"}},
        ],
        "scale_sets": list(scale_sets),
    }


@pytest.fixture
async def world() -> AsyncIterator[DaemonWorld]:
    root = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))
    w = DaemonWorld(
        root,
        {"host1": FakeProvider("host1", vcpus=64, memory_bytes=128 * GIB)},
        clock_factor=1,  # the throttle's window and Retry-After in real seconds
        github_timing=GITHUB_TIMING,
        emulator_options=THROTTLE,
    )
    yield w
    await w.stop()
    shutil.rmtree(root, ignore_errors=True)


async def emulator(world: DaemonWorld, method: str, path: str, **kw: Any) -> Any:
    async with httpx.AsyncClient(timeout=WAIT) as client:
        answer = await client.request(method, f"{world.emulator.base_url}{path}", **kw)
    answer.raise_for_status()
    return answer.json() if answer.content else None


async def registered(world: DaemonWorld) -> int:
    """Runners GitHub registered (JIT configs it gave out), all told."""
    state = await emulator(world, "GET", "/_fake/state")
    return int(state["runnersCreated"])


def registrations(document: dict[str, Any] | None) -> dict[str, Any]:
    return dict((document or {}).get("daemon", {}).get("registrations", {}))


def desired(document: dict[str, Any] | None, name: str) -> int | None:
    for entry in (document or {}).get("scale_sets", []):
        if entry.get("name") == name:
            value = entry.get("desired")
            return int(value) if value is not None else None
    return None


def blamed(world: DaemonWorld) -> list[dict[str, Any]]:
    """Log lines that blame or skip a provider."""
    return [
        line
        for line in world.log_lines()
        if line.get("event") in ("provider.failing", "provider.full", "provider.crash_loop")
        or "start_timeout" in str(line.get("sentence", ""))
    ]


async def test_a_throttled_registration_blames_no_host_and_none_registers_after_demand_goes(
    world: DaemonWorld,
) -> None:
    await world.start(fleet(scale_set("linux", "linux")))
    jobs = [
        await world.queue_job(labels=["linux"], name=f"job-{n}", duration=600) for n in range(8)
    ]
    # GitHub pushed back, the daemon learned its pace, and creates wait for their turn.
    await world.wait_for(
        lambda d: registrations(d).get("source") == "github" and len(world.machines()) >= 4,
        "four runners created under GitHub's pace",
        WAIT,
    )
    for job in jobs:
        await emulator(world, "POST", f"/_fake/jobs/{job['jobId']}/cancel")
    document = await world.wait_for(
        lambda d: desired(d, "linux") == 0, "the demand to be gone", WAIT
    )
    at_zero = await registered(world)
    assert registrations(document)["waiting"] > 0 or at_zero < len(jobs), (
        "creates were still waiting for their turn when the demand went"
    )
    await world.wait_for(
        lambda d: registrations(d).get("waiting") == 0, "the queued creates to be dropped", WAIT
    )
    await world.wait_for(
        lambda d: not any(s.get("creating") for s in d.get("scale_sets", [])),
        "no create in flight",
        WAIT,
    )
    assert await registered(world) == at_zero, "a runner was registered after desired reached 0"
    assert any(line.get("event") == "runner.create_dropped" for line in world.log_lines())
    assert blamed(world) == [], "a healthy host was blamed for GitHub's pace"
    status = await world.status()
    assert status is not None and status.get("skips", []) == []

    # GitHub stops throttling: the learned pace relaxes, halving its wait every 2 s.
    learned = registrations(status)["per_minute"]
    assert 0 < learned < 30
    for route in ("A13", "R4"):
        lifted = {"route": route, "kind": "throttle", "rate": 0}
        await emulator(world, "POST", "/_fake/faults", json=lifted)
    await world.wait_for(
        lambda d: registrations(d).get("per_minute", 0) >= 8 * learned,
        "the learned pace to relax",
        WAIT,
    )


async def test_apply_removing_a_scale_set_drops_its_queued_creates_quietly(
    world: DaemonWorld,
) -> None:
    kept = scale_set("linux", "linux")
    await world.start(fleet(kept, scale_set("gpu", "gpu")))
    for n in range(8):
        await world.queue_job(labels=["gpu"], name=f"gpu-{n}", duration=600)
    await world.wait_for(
        lambda d: registrations(d).get("waiting", 0) >= 2, "creates waiting for their turn", WAIT
    )
    (world.root / "scale_sets.yaml").write_text(yaml.safe_dump(fleet(kept), sort_keys=False))
    # The file names providers by address, as DaemonWorld.start wrote them.
    written = yaml.safe_load((world.root / "scale_sets.yaml").read_text())
    written["providers"][0]["address"] = f"unix://{world.root}/host1.sock"
    (world.root / "scale_sets.yaml").write_text(yaml.safe_dump(written, sort_keys=False))
    applied = await world.rungar("apply", str(world.root / "scale_sets.yaml"))
    assert applied.returncode == 0, applied.stdout + applied.stderr
    at_apply = await registered(world)
    await world.wait_for(
        lambda d: registrations(d).get("waiting") == 0, "the removed scale set's creates", WAIT
    )
    await world.wait_for(
        lambda d: [s["name"] for s in d.get("scale_sets", [])] == ["linux"],
        "the scale set to be gone",
        WAIT,
    )
    log = (world.root / "daemon.log").read_text()
    for quiet in ("Traceback", "KeyError", "Task was destroyed", "runner.create_crashed"):
        assert quiet not in log, quiet
    assert await registered(world) <= at_apply + 1, "registered for a scale set removed"


@pytest.mark.long
async def test_a_retry_after_longer_than_start_timeout_blames_no_host() -> None:
    # Three registrations in any 35 s: the fourth is answered 429 with a Retry-After of about
    # 35 s, longer than start_timeout (30 s, its least), and waits that long for its next turn.
    root = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))
    world = DaemonWorld(
        root,
        {"host1": FakeProvider("host1", vcpus=64, memory_bytes=128 * GIB)},
        clock_factor=1,
        github_timing={"registration_pace_window": 35.0},
        emulator_options={"jit_rate_per_minute": 3 * 60 / 35, "jit_rate_window": 35.0},
    )
    try:
        await world.start(fleet(scale_set("linux", "linux")))
        for n in range(4):
            await world.queue_job(labels=["linux"], name=f"job-{n}", duration=600)
        await world.wait_for(
            lambda d: len(world.machines()) >= 4 or bool(blamed(world)),
            "the throttled fourth runner's create to end",
            3 * WAIT,
        )
        assert blamed(world) == [], "host1 was blamed for GitHub's Retry-After"
        assert len(world.machines()) == 4
        status = await world.status()
        assert status is not None and status.get("skips", []) == []
        assert registrations(status)["throttled"] >= 1, "GitHub did answer 429"
    finally:
        await world.stop()
        shutil.rmtree(root, ignore_errors=True)
