"""One healthy provider and one hostile one, through the real daemon: every job completes, none of
the healthy provider's runners is removed because of what the other said, nothing is left
behind, and ``rungar status`` names the hostile provider's fault in words.

The hostile provider is the kit in :mod:`rungar.testing.hostile_provider`, served over gRPC
beside a healthy fake provider, with the GitHub emulator queuing the jobs.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from pathlib import Path
from typing import Any

import pytest

from rungar.testing.fake_provider import GIB, FakeProvider
from rungar.testing.github_emulator.model import JobState
from rungar.testing.hostile_provider import HostileProvider
from tests.e2e.daemon_world import DaemonWorld
from tests.e2e.test_daemon_hostile_load import Case
from tests.e2e.test_daemon_hostile_load import fleet as hostile_fleet

JOBS = 10


def fleet() -> dict[str, Any]:
    return hostile_fleet(Case(), {}, max_runners=6)


async def hostile_world(scenarios: Collection[str]) -> AsyncIterator[DaemonWorld]:
    root = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))
    healthy = FakeProvider("a", vcpus=64, memory_bytes=128 * GIB)
    hostile = HostileProvider("b", scenarios=scenarios, vcpus=64, memory_bytes=128 * GIB)
    hostile.others = lambda: healthy.machines
    world = DaemonWorld(root, {"a": healthy, "b": hostile})
    try:
        await world.start(fleet())
        yield world
    finally:
        await world.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
async def lister() -> AsyncIterator[DaemonWorld]:
    """b lists a's machines (stopped), its own twice, another installation's, a 200 KB name."""
    scenarios = {"lists_others", "lists_twice", "other_installation", "bad_names"}
    async for world in hostile_world(scenarios):
        yield world


@pytest.fixture
async def misnamer() -> AsyncIterator[DaemonWorld]:
    """b answers every Create with another machine's name."""
    async for world in hostile_world({"misnames_creates"}):
        yield world


def events(world: DaemonWorld) -> list[dict[str, Any]]:
    path = world.root / "state" / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


async def run_jobs(
    world: DaemonWorld, while_running: Callable[[], Awaitable[None]] | None = None
) -> None:
    for i in range(JOBS):
        await world.queue_job(labels=["linux"], name=f"job-{i}", duration=20.0)
    if while_running is not None:
        await while_running()
    await world.wait_for(
        lambda _: all(j.state is JobState.COMPLETED for j in world.emulator.state.jobs.values()),
        "every job to complete",
        120,
    )
    # Nothing left behind: every machine deleted, every registration removed.
    await world.wait_for(
        lambda s: s is not None and not s["runners"] and not world.machines(),
        "every machine to be deleted",
        60,
    )
    await world.wait_for(
        lambda _: not world.emulator.state.runners, "every registration to be removed", 60
    )


def check_outcome(world: DaemonWorld) -> list[dict[str, Any]]:
    """0 duplicates, no runner of a ended by anything but its own work, a never backed off."""
    found = events(world)
    created = Counter(e["name"] for e in found if e["action"] == "created")
    assert created and max(created.values()) == 1, "no runner created twice"
    ended_on_a = [
        e
        for e in found
        if e["provider"] == "a"
        and (
            e["action"] in ("machine_gone", "lost", "crash_loop")
            or (e["action"] == "removed" and e["attributes"].get("reason") == "ended")
        )
    ]
    assert ended_on_a == [], "none of a's runners ended by what b said"
    adopted = [(e["name"], e["provider"]) for e in found if e["action"] == "adopted"]
    assert adopted == [], "nothing adopted"
    return found


async def test_a_provider_listing_another_providers_machines_costs_it_no_job(
    lister: DaemonWorld,
) -> None:
    async def a_pass_while_both_hold_machines() -> None:
        # b lists a's machines, and its own twice, only in a pass made while both hold some:
        # one is asked for then, rather than hoping the reconcile interval falls there.
        await lister.wait_for(
            lambda _: all(lister.providers[p].fake.machines for p in ("a", "b")),
            "machines on a and on b",
            60,
        )
        await lister.reconcile()

    await run_jobs(lister, a_pass_while_both_hold_machines)
    found = check_outcome(lister)
    faults = Counter(e["attributes"]["fault"] for e in found if e["action"] == "listing_fault")
    assert faults["held_elsewhere"] >= 1 and faults["other_installation"] == 1, faults
    assert faults["not_a_name"] == 1 and faults["listed_twice"] >= 1
    assert {e["provider"] for e in found if e["action"] == "listing_fault"} == {"b"}
    shown = await lister.rungar("status")
    assert "provider b listed machine linux-" in shown.stdout
    assert "which provider a holds: ignored" in shown.stdout


async def test_a_provider_answering_creates_with_another_name_has_its_creates_refused(
    misnamer: DaemonWorld,
) -> None:
    await run_jobs(misnamer)
    found = check_outcome(misnamer)
    assert {e["provider"] for e in found if e["action"] == "created"} == {"a"}
    failing = [e for e in found if e["action"] == "failing" and e["provider"] == "b"]
    assert failing and "answered with machine linux-" in failing[0]["message"]
