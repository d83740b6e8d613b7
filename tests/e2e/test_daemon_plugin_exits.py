"""A provider plugin that exits on its own, through the real daemon: the event and the log say
the plugin exited, with its exit code and when it restarts, never that the daemon stopped; the
daemon goes on, restarts the plugin and reaches it again.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from rungar.testing.fake_provider import FakeProvider
from tests.e2e.daemon_world import DaemonWorld
from tests.waiting import WAIT, until_awaited

# Serves a fake provider; the first time it is listed, it exits with code 1 a moment later
# (once: the marker file it writes stays, so the restarted plugin keeps running).
PLUGIN = """
import asyncio, os, sys
from pathlib import Path
from rungar.rpc.plugin import serve_plugin
from rungar.testing.fake_provider import FakeProvider

marker = Path(sys.argv[1])

class ExitsOnce(FakeProvider):
    async def list(self, selector):
        if not marker.exists():
            marker.write_text(str(os.getpid()))
            asyncio.get_running_loop().call_later(0.2, os._exit, 1)
        return await super().list(selector)

asyncio.run(serve_plugin(ExitsOnce("flaky")))
"""

EXITED = "plugin flaky exited (code 1); restarting in 1 s"

# About 6 s of a daemon's start and a plugin's restart: in make test-long, beside the unit and
# integration tests of the sentence and the restart in the default run
# (tests/integration/test_rpc_plugin.py).
pytestmark = pytest.mark.long


@pytest.fixture
async def world() -> AsyncIterator[DaemonWorld]:
    root = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))
    (root / "plugin.py").write_text(PLUGIN)
    command = [sys.executable, str(root / "plugin.py"), str(root / "exited-once")]
    world = DaemonWorld(root, {"a": FakeProvider("a")})
    fleet = {
        "version": 1,
        "timing": {"reconcile_interval": "5s"},
        "providers": [
            {"name": "a", "type": "runnerd", "runner": {"vcpus": 1, "memory": "1GiB"}},
            {"name": "flaky", "type": "flaky", "command": command},
        ],
        "scale_sets": [
            {"name": "linux", "labels": ["linux"], "max_runners": 2, "providers": ["a"]},
        ],
    }
    try:
        await world.start(fleet)
        yield world
    finally:
        await world.stop()
        shutil.rmtree(root, ignore_errors=True)


def events(world: DaemonWorld) -> list[dict[str, Any]]:
    path = world.root / "state" / "events.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_a_plugin_that_exits_says_it_exited_and_restarts_never_that_the_daemon_stopped(
    world: DaemonWorld,
) -> None:
    def exited() -> list[dict[str, Any]]:
        return [e for e in events(world) if e["action"] == "plugin_exited"]

    await world.wait_for(lambda _: exited(), "the plugin to exit", WAIT)
    [event] = exited()
    assert (event["kind"], event["name"], event["message"]) == ("provider", "flaky", EXITED)
    logged = [line for line in world.log_lines() if line.get("event") == "plugin.exited"]
    assert [(line["sentence"], line["code"]) for line in logged] == [(EXITED, 1)]

    # Restarted, and reached again: a reconcile pass lists it without a fault.
    def flaky(status: dict[str, Any] | None) -> dict[str, Any] | None:
        found = [p for p in (status or {}).get("providers", []) if p["name"] == "flaky"]
        return found[0] if found else None

    async def listed_again() -> bool:
        await world.reconcile()
        shown = flaky(await world.status())
        return shown is not None and shown["state"] == "ok"

    await until_awaited(listed_again, "the restarted plugin to be listed")
    assert world.daemon is not None and world.daemon.poll() is None, "the daemon runs on"
    said = [e["message"] for e in events(world)] + [json.dumps(x) for x in world.log_lines()]
    assert not [s for s in said if "daemon stopped" in s.lower()], "never the daemon stopped"
