"""``rungar serve`` registering through two GitHub Apps of one organisation (docs/github.md,
"More than one App"), against the emulator, which counts each App installation's
registrations on their own: both Apps register runners; one is revoked mid-run and every job
still completes, through the other; the event and ``rungar status`` name the revoked App."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rungar.testing.fake_provider import GIB, FakeProvider
from rungar.testing.github_emulator.model import JobState
from tests.e2e.daemon_world import DaemonWorld
from tests.github_app import app_keys
from tests.waiting import WAIT

FIRST, SECOND = "Iv1.first", "Iv1.second"
BEFORE, AFTER = 4, 6


def fleet() -> dict[str, Any]:
    return {
        "version": 1,
        "providers": [
            {"name": "host", "type": "runnerd", "runner": {"vcpus": 1, "memory": "256MiB"}},
        ],
        "scale_sets": [
            {"name": "linux", "labels": ["linux"], "max_runners": 12, "providers": ["host"]},
        ],
    }


@pytest.fixture
async def world() -> AsyncIterator[DaemonWorld]:
    root = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))
    keys = {FIRST: app_keys(), SECOND: app_keys()}
    w = DaemonWorld(
        root,
        {"host": FakeProvider("host", vcpus=64, memory_bytes=128 * GIB)},
        apps={FIRST: (1, keys[FIRST][0]), SECOND: (2, keys[SECOND][0])},
        emulator_options={
            "apps": {app: public for app, (_, public) in keys.items()},
            "installations": {1: "octo-org", 2: "octo-org"},
        },
    )
    yield w
    await w.stop()
    shutil.rmtree(root, ignore_errors=True)


def passed_by(world: DaemonWorld) -> dict[str, int]:
    """Runners the emulator registered, by App installation."""
    return dict(world.emulator.state.registered_by)


def completed(world: DaemonWorld) -> int:
    return sum(j.state is JobState.COMPLETED for j in world.emulator.state.jobs.values())


def app_entry(document: dict[str, Any] | None, app: str) -> dict[str, Any]:
    apps = (document or {}).get("daemon", {}).get("registrations", {}).get("apps", [])
    return next((a for a in apps if a.get("app") == app), {})


async def test_two_apps_register_and_a_revoked_one_is_skipped_while_every_job_completes(
    world: DaemonWorld,
) -> None:
    await world.start(fleet())
    for n in range(BEFORE):
        await world.queue_job(labels=["linux"], name=f"before-{n}", duration=5)
    await world.wait_for(
        lambda _: (
            passed_by(world).get("installation:1", 0) >= 1
            and passed_by(world).get("installation:2", 0) >= 1
        ),
        "both Apps to register a runner",
        WAIT,
    )
    async with httpx.AsyncClient(timeout=WAIT) as client:
        revoked = await client.post(f"{world.emulator.base_url}/_fake/apps/{SECOND}/revoke")
    assert revoked.status_code == 204
    second_before = passed_by(world)["installation:2"]
    for n in range(AFTER):
        await world.queue_job(labels=["linux"], name=f"after-{n}", duration=5)
    document = await world.wait_for(
        lambda d: completed(world) == BEFORE + AFTER and app_entry(d, SECOND).get("state"),
        "every job to complete",
        3 * WAIT,
    )
    assert passed_by(world)["installation:2"] == second_before, "the revoked App registered"
    assert passed_by(world)["installation:1"] >= AFTER, "the other App took them all"
    second = app_entry(document, SECOND)
    assert second["state"] == "failing" and "401" in second["error"], second
    assert app_entry(document, FIRST)["state"] == "ok"
    events = await world.rungar("events", "--json")
    failing = [line for line in events.stdout.splitlines() if '"github_app"' in line]
    assert len(failing) == 1 and SECOND in failing[0] and '"failing"' in failing[0], failing
    status = await world.rungar("status")
    assert f"App {SECOND}" in status.stdout and "failing, skipped" in status.stdout
    log = (world.root / "daemon.log").read_text()
    assert "runner.register_failed" not in log and "Traceback" not in log
