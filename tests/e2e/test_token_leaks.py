"""A throttled burst with debug logging leaves no piece of any token or JIT config anywhere.

``rungar serve`` authenticates as two GitHub Apps of one organisation (``github.apps``: every
App's tokens are covered, not only the first's) against the emulator, which issues the stateless
installation tokens GitHub issues since 2026 (``ghs_<app id>_<JWT>``, about 520 characters of
base64url), and throttles registrations, so the daemon meets 429s, retries and renews tokens
while it logs at debug level. Afterwards every secret the emulator handed out (installation,
registration, admin and message-queue tokens, JIT configs and the runner credentials inside
them) and both Apps' private keys are cut into every 8-character piece, and none may appear in
the daemon's log, the
runners' logs, the state directory (database, events), ``rungar status`` and ``rungar events``,
the fleet page and its API, or ``/metrics``.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rungar.testing.fake_provider import GIB, FakeProvider
from rungar.testing.github_emulator.control import job_spec
from rungar.testing.github_emulator.model import JobState
from tests.e2e.daemon_world import DaemonWorld
from tests.github_app import app_keys
from tests.waiting import WAIT

JOBS = 6
PIECE = 8
APP, SECOND_APP = "Iv1.leakcheck", "Iv1.leakcheck2"
KEYS = {APP: app_keys(), SECOND_APP: app_keys()}


def fleet() -> dict[str, Any]:
    return {
        "version": 1,
        "providers": [
            {"name": "host", "type": "runnerd", "runner": {"vcpus": 1, "memory": "1GiB"}},
        ],
        "scale_sets": [
            {"name": "linux", "labels": ["linux"], "max_runners": JOBS, "providers": ["host"]},
        ],
    }


@pytest.fixture
async def world() -> AsyncIterator[DaemonWorld]:
    root = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))
    w = DaemonWorld(
        root,
        {"host": FakeProvider("host", vcpus=64, memory_bytes=128 * GIB)},
        metrics=True,
        dashboard=True,
        apps={APP: (1, KEYS[APP][0]), SECOND_APP: (2, KEYS[SECOND_APP][0])},
        log_level="debug",
        # GitHub's registration limit, compressed: 2 JIT configs every 4 s for each App's
        # installation, 429 past it; the daemon counts its learned pace over the same window.
        emulator_options={
            "apps": {app: public for app, (_, public) in KEYS.items()},
            "installations": {1: "octo-org", 2: "octo-org"},
            "jit_rate_per_minute": 30,
            "jit_rate_window": 4,
        },
        github_timing={"registration_pace_window": 4},
    )
    # Queued before the daemon starts, the jobs are all assigned at its first poll: a burst of
    # registrations that meets GitHub's limit however busy the machine is.
    for n in range(JOBS):
        w.emulator.state.queue_job(
            job_spec({"labels": ["self-hosted", "linux"], "name": f"leak-{n}", "duration": 10})
        )
    await w.start(fleet())
    yield w
    await w.stop()
    shutil.rmtree(root, ignore_errors=True)


def pieces(secrets: list[str]) -> set[str]:
    return {s[i : i + PIECE] for s in secrets for i in range(len(s) - PIECE + 1)}


def leaked(content: str, wanted: set[str]) -> set[str]:
    return {content[i : i + PIECE] for i in range(len(content) - PIECE + 1)} & wanted


async def test_a_throttled_burst_with_debug_logs_leaves_no_piece_of_any_token_anywhere(
    world: DaemonWorld,
) -> None:
    state = world.emulator.state
    await world.wait_for(
        lambda _: sum(j.state is JobState.COMPLETED for j in state.jobs.values()) == JOBS,
        "every job to complete",
        3 * WAIT,
    )

    throttled = [r for r in state.requests if r["status"] == 429]
    assert throttled, "the burst met no registration throttle: the test proves nothing"
    issued = list(state.tokens.issued)
    stateless = [t for t in issued if t.startswith("ghs_") and t.count(".") == 2]
    assert stateless, "the daemon was handed no stateless installation token"
    assert state.runners_created >= JOBS, "fewer runners registered than jobs run"
    assert set(state.registered_by) == {"installation:1", "installation:2"}, (
        "both Apps registered runners: both Apps' tokens are in the search"
    )
    # The private keys' base64 lines (the PEM's armour lines are no secret).
    keys = [line for private, _ in KEYS.values() for line in private.splitlines()[1:-1]]
    daemon_log = (world.root / "daemon.log").read_text(errors="replace")
    assert '"level": "debug"' in daemon_log, "the daemon did not log at debug level"

    async with httpx.AsyncClient(timeout=WAIT) as client:
        web = {
            path: (await client.get(world.dashboard_url + path)).text
            for path in ("", "api/status", "api/usage")
        }
        metrics = (await client.get(f"http://127.0.0.1:{world.metrics_port}/metrics")).text
    places: dict[str, str] = {
        "daemon log": daemon_log,
        "status": (await world.rungar("status")).stdout,
        "status --json": (await world.rungar("status", "--json")).stdout,
        "events": (await world.rungar("events")).stdout,
        "metrics": metrics,
        **{f"fleet page /{path}": text for path, text in web.items()},
    }
    for path in [*(world.root / "state").rglob("*"), *world.root.glob("*.log")]:
        if path.is_file():
            places[str(path.relative_to(world.root))] = path.read_bytes().decode("latin-1")
    assert "state/state.db" in places and "state/events.jsonl" in places

    wanted = pieces(issued + keys)
    found = {where: sorted(leaked(text, wanted))[:3] for where, text in places.items()}
    assert not {where: p for where, p in found.items() if p}, "pieces of secrets found"
