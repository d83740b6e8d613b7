"""A provider whose runners exit at once, through the real daemon: the first failure is only
counted, the second backs the provider off, and ``rungar status`` shows the crash-loop sentence
with the runner's own last lines of output, read from the provider over gRPC (``LastOutput``)."""

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
from tests.waiting import until

# The runner prints two lines and exits before it ever connects to GitHub.
BROKEN_RUNNER = [
    sys.executable,
    "-c",
    "print('Starting Runner listener', flush=True); "
    "print('Error: the runner config is not valid for this host', flush=True); "
    "raise SystemExit(3)",
]


def fleet() -> dict[str, Any]:
    return {
        "version": 1,
        "timing": {"reconcile_interval": "5s", "starting_sync_interval": "1s", "left_grace": "1s"},
        "providers": [
            {"name": "host", "type": "runnerd", "runner": {"vcpus": 2, "memory": "1GiB"}},
        ],
        "scale_sets": [
            {
                "name": "linux",
                "labels": ["linux"],
                "max_runners": 4,
                "min_runners": 1,
                "start_timeout": "60s",
                "providers": ["host"],
            }
        ],
    }


@pytest.fixture
async def world() -> Any:
    root = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))
    w = DaemonWorld(
        root,
        {"host": FakeProvider("host", vcpus=64, memory_bytes=128 * GIB)},
        runner_command=BROKEN_RUNNER,
    )
    await w.start(fleet())
    yield w
    await w.stop()
    shutil.rmtree(root, ignore_errors=True)


def crash_skips(document: dict[str, Any] | None) -> list[dict[str, Any]]:
    return [s for s in (document or {}).get("skips", []) if s.get("crash_loop")]


async def test_runners_that_exit_at_once_are_backed_off_at_the_second_and_status_shows_why(
    world: DaemonWorld,
) -> None:
    document = await world.wait_for(
        lambda d: bool(crash_skips(d)), "the provider backed off after crashes", 90
    )
    (skip,) = crash_skips(document)
    assert skip["refusals"] == 2, "backed off at the second failure in a row, not the first"
    assert skip["output"][-2:] == [
        "Starting Runner listener",
        "Error: the runner config is not valid for this host",
    ]

    # The daemon writes its log apart from the status it answers: wait for both lines.
    def crash_events() -> list[str]:
        wanted = ("runner.crashed", "provider.crash_loop")
        found = [line["event"] for line in world.log_lines() if line.get("event") in wanted]
        return found if "provider.crash_loop" in found else []

    events = await until(crash_events, "logged the crash loop")
    assert events[:2] == ["runner.crashed", "provider.crash_loop"]
    shown = await world.rungar("status")
    assert (
        "linux's runners on host exit before connecting (2 in a row); next try in" in shown.stdout
    )
    assert "    | Error: the runner config is not valid for this host" in shown.stdout


async def test_a_crash_looping_scale_set_shows_crash_loop_in_red_and_its_json_is_documented(
    world: DaemonWorld,
) -> None:
    await world.wait_for(lambda d: bool(crash_skips(d)), "the provider backed off", 90)
    shown = await world.rungar("--color", "never", "status")
    row = next(line for line in shown.stdout.splitlines() if line.startswith("  linux "))
    assert row.split()[1:3] == ["CRASH", "LOOP"], shown.stdout
    assert "  linux: linux's runners on host exit before connecting (2 in a row)" in shown.stdout
    assert "\033[" not in shown.stdout
    painted = await world.rungar("status", "--color", "always")
    assert "\033[31mCRASH LOOP\033[0m" in painted.stdout, painted.stdout
    assert "\033[32mOK\033[0m" in painted.stdout  # the provider's own word: green
    piped = await world.rungar("status")  # auto, and no terminal: no colour
    assert piped.returncode == 0 and "\033[" not in piped.stdout

    # Every key of the real document is on docs/json.md, and every key it promises is there.
    printed = await world.rungar("status", "--json")
    document = json.loads(printed.stdout)
    assert crash_skips(document), "the crash loop's skip, with its own keys"
    found = mismatches(document, read_schema())
    assert found == [], "\n".join(found)
