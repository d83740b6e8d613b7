"""A provider whose runner is below GitHub's minimum version, through the real daemon, the
emulator and providers served over gRPC: it gets no runner, placement falls through to the
compliant provider, which takes them all, and ``rungar status`` says why."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from rungar.testing.fake_provider import GIB, FakeProvider
from tests.e2e.daemon_world import DaemonWorld
from tests.json_doc import mismatches, read_schema

REASON = "runner 2.320.0 is below GitHub's minimum 2.329.0"


def fleet() -> dict[str, Any]:
    return {
        "version": 1,
        "timing": {"reconcile_interval": "5s", "starting_sync_interval": "1s"},
        "providers": [
            # The outdated one weighs more: pack would try it first.
            {"name": "old", "type": "runnerd", "weight": 10, "runner": {"vcpus": 1}},
            {"name": "new", "type": "runnerd", "runner": {"vcpus": 1}},
        ],
        "scale_sets": [
            {
                "name": "linux",
                "labels": ["linux"],
                "max_runners": 6,
                "min_runners": 3,
                "placement": "pack",
                "providers": ["old", "new"],
            }
        ],
    }


@pytest.fixture
async def world() -> Any:
    root = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))  # short: unix socket paths
    w = DaemonWorld(
        root,
        {
            "old": FakeProvider("old", vcpus=64, memory_bytes=64 * GIB, runner_version="2.320.0"),
            "new": FakeProvider("new", vcpus=64, memory_bytes=64 * GIB, runner_version="2.330.0"),
        },
    )
    await w.start(fleet())
    yield w
    await w.stop()
    shutil.rmtree(root, ignore_errors=True)


async def test_an_outdated_provider_gets_no_runner_and_the_compliant_one_takes_them_all(
    world: DaemonWorld,
) -> None:
    def placed(status: dict[str, Any] | None) -> bool:
        runners = (status or {}).get("runners", [])
        return len(runners) >= 3 and all(r["state"] == "idle" for r in runners)

    status = await world.wait_for(placed, "three idle runners", 90)
    assert {r["provider"] for r in status["runners"]} == {"new"}
    assert world.providers["old"].fake.calls["create"] == 0, "nothing was asked of old"
    assert world.providers["new"].fake.created == 3
    versions = {p["name"]: p["runner_version"] for p in status["providers"]}
    assert versions == {"old": "2.320.0", "new": "2.330.0"}
    (skip,) = [s for s in status["skips"] if s.get("outdated")]
    assert (skip["scale_set"], skip["provider"], skip["error"]) == ("linux", "old", REASON)

    shown = await world.rungar("status")
    assert f"  linux's runners are not placed on old: {REASON}" in shown.stdout, shown.stdout
    printed = await world.rungar("status", "--json")
    found = mismatches(json.loads(printed.stdout), read_schema())
    assert found == [], "\n".join(found)


@pytest.fixture
async def unknown_versions() -> Any:
    """Neither provider reports its runner version; old's runners are 2.320.0, which the
    emulator (GitHub's minimum 2.329.0) refuses when they connect."""
    root = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))
    w = DaemonWorld(
        root,
        {
            "old": FakeProvider("old", vcpus=64, memory_bytes=64 * GIB),
            "new": FakeProvider("new", vcpus=64, memory_bytes=64 * GIB),
        },
        # Each provider's Info asked every second: a runner installed anew is seen at once.
        github={"runner_versions": {"info_interval": 1}},
    )
    w.providers["old"].command = [
        sys.executable, "-m", "rungar.cli.fake_runner", "--runner-version", "2.320.0",
    ]  # fmt: skip
    await w.start(fleet())
    yield w
    await w.stop()
    shutil.rmtree(root, ignore_errors=True)


# In make test-long for its length (about 20 s, a kill -9 and a restart); the placement skip
# runs by default in the test above, the outdated exit's classification in
# tests/integration/test_engine_scaling.py.
@pytest.mark.long
async def test_a_runner_github_refuses_at_connect_is_outdated_never_a_crash_and_stays_skipped(
    unknown_versions: DaemonWorld,
) -> None:
    """... across a kill -9 and a restart of rungar serve, until the provider reports a newer
    runner."""
    world = unknown_versions
    turned_away = "runner 2.320.0 was refused by GitHub as outdated"

    def settled(status: dict[str, Any] | None) -> bool:
        runners = (status or {}).get("runners", [])
        skips = [s for s in (status or {}).get("skips", []) if s.get("outdated")]
        idle = [r for r in runners if r["state"] == "idle" and r["provider"] == "new"]
        return len(idle) >= 3 and bool(skips)

    status = await world.wait_for(settled, "old skipped as outdated, new serving", 120)
    (skip,) = [s for s in status["skips"] if s.get("outdated")]
    assert (skip["provider"], skip["error"]) == ("old", turned_away)
    assert not [s for s in status["skips"] if s.get("crash_loop")], "no crash loop"
    events = [line.get("event") for line in world.log_lines()]
    assert "runner.outdated" in events
    assert "runner.crashed" not in events and "provider.crash_loop" not in events
    outdated = [line for line in world.log_lines() if line.get("event") == "runner.outdated"]
    assert {line["runner_version"] for line in outdated} == {"2.320.0"}
    # The first runners went there at once (nothing was known); each told its exit, and none
    # was placed there after.
    assert world.providers["old"].fake.created == len(outdated) >= 1

    # kill -9 and start again: the skip is kept in the state database, so the new daemon
    # applies it from its first status on, without another runner having to be refused.
    world.kill_daemon()
    await world.start_daemon()
    status = await world.wait_for(lambda s: bool(s and s["providers"]), "the daemon again", 60)
    kept = [s for s in status["skips"] if s.get("outdated")]
    assert [(s["provider"], s["error"]) for s in kept] == [("old", turned_away)], status["skips"]
    await world.reconcile()
    assert world.providers["old"].fake.created == len(outdated), "nothing placed on old since"

    # The host installs a newer runner and says so in its Info: the skip ends.
    world.providers["old"].fake.runner_version = "2.330.0"

    def lifted(status: dict[str, Any] | None) -> bool:
        versions = {p["name"]: p["runner_version"] for p in (status or {}).get("providers", [])}
        skips = [s for s in (status or {}).get("skips", []) if s.get("outdated")]
        return versions.get("old") == "2.330.0" and not skips

    await world.reconcile()  # a pass now rather than at the next tick: Info is asked in it
    await world.wait_for(lifted, "old's skip to end with its newer runner", 60)
