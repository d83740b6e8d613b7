"""The warning that GitHub is about to stop queueing jobs to a provider's runner, through the
real daemon, the emulator's latest-release route and providers served over gRPC: a release
published 24 days ago and a provider still on the runner before it gives a line in ``rungar
status``, a finding of ``rungar doctor``, an event and ``rungar_provider_runner_days_left``;
a newer release GitHub publishes during the run is read and told again."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx
import pytest

from rungar.model.runner_release import day_of
from rungar.placement.version_window import DAY
from rungar.testing.fake_provider import GIB, FakeProvider
from tests.e2e.daemon_world import DaemonWorld, sample_key
from tests.waiting import until

AGE = 24 * DAY  # the release's age: 6 days left of GitHub's 30


@pytest.fixture
async def world() -> Any:
    root = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))  # short: unix socket paths
    w = DaemonWorld(
        root,
        {
            "old": FakeProvider("old", vcpus=8, memory_bytes=8 * GIB, runner_version="2.329.0"),
            "new": FakeProvider("new", vcpus=8, memory_bytes=8 * GIB, runner_version="2.330.0"),
        },
        clock_factor=1,
        metrics=True,
        emulator_options={"runner_latest": "2.330.0", "runner_latest_age": AGE},
        # GitHub's latest release read every second, not every hour: the run is short.
        github={"runner_versions": {"check_interval": 1}},
    )
    await w.start(
        {
            "version": 1,
            "providers": [
                {"name": "old", "type": "runnerd", "runner": {"vcpus": 1}},
                {"name": "new", "type": "runnerd", "runner": {"vcpus": 1}},
            ],
            "scale_sets": [
                {
                    "name": "linux",
                    "labels": ["linux"],
                    "max_runners": 2,
                    "providers": ["old", "new"],
                }
            ],
        }
    )
    yield w
    await w.stop()
    shutil.rmtree(root, ignore_errors=True)


def deadline(status: dict[str, Any] | None, provider: str) -> dict[str, Any]:
    found = [p for p in (status or {}).get("providers", []) if p["name"] == provider]
    return (found[0].get("runner_deadline") or {}) if found else {}


def expiring(world: DaemonWorld) -> list[dict[str, Any]]:
    lines = (world.root / "state" / "events.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    return [e for e in events if e["action"] == "runner_expiring"]


async def test_a_runner_six_days_from_githubs_cutoff_is_warned_of_everywhere(
    world: DaemonWorld,
) -> None:
    status = await world.wait_for(
        lambda s: deadline(s, "old").get("warn") is True, "old's warning", 60
    )
    released = status["daemon"]["runner_release"]
    assert (released["latest"], released["source"]) == ("2.330.0", "github")
    assert deadline(status, "new") == {}, "new runs the latest"
    said = (
        f"old runs runner 2.329.0; the latest is 2.330.0 (released "
        f"{day_of(released['released_at'])}): GitHub stops queueing jobs to it on "
        f"{day_of(released['released_at'] + 30 * DAY)} (in 5d"
    )
    shown = await world.rungar("status")
    assert f"  {said}" in shown.stdout, shown.stdout

    metrics = await world.scrape()
    left = metrics[sample_key("rungar_provider_runner_days_left", {"provider": "old"})]
    assert 5.9 < left <= 6.0
    assert sample_key("rungar_provider_runner_days_left", {"provider": "new"}) not in metrics

    doctor = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "rungar.cli.main", "doctor", "-c", str(world.root / "rungar.yaml")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert said in doctor.stdout, doctor.stdout
    assert "install runner 2.330.0 on old's machines" in doctor.stdout

    (event,) = expiring(world)
    assert event["provider"] == "old" and event["message"].startswith(said)
    assert event["attributes"]["latest"] == "2.330.0"

    # GitHub publishes 2.331.0 during the run: read at the next check, told once more; old's
    # window still closes 30 days after 2.330.0, the first release it missed.
    async with httpx.AsyncClient() as http:
        published = await http.post(
            f"{world.emulator.base_url}/_fake/runner-release", json={"version": "2.331.0"}
        )
        assert published.status_code == 204
    status = await world.wait_for(
        lambda s: deadline(s, "old").get("latest") == "2.331.0", "2.331.0 to be read", 60
    )
    assert deadline(status, "new")["warn"] is False, "new has 30 days for 2.331.0"
    assert deadline(status, "old")["stops_at"] == released["released_at"] + 30 * DAY
    assert [e["attributes"]["latest"] for e in expiring(world)] == ["2.330.0", "2.331.0"]

    def conditional() -> bool:
        reads = [r for r in world.emulator.state.requests if r["route"] == "R13"]
        return any(r["status"] == 304 for r in reads)

    await until(conditional, "an unchanged answer read as 304", 60)
