"""After a burst of jobs, no secret is anywhere an operator or another user could read it.

A running ``rungar serve`` takes a burst of jobs: each gets a runner with a JIT config, signed
deliveries arrive, metrics are scraped. Then every place the daemon writes or shows is
searched for every JIT config it handed out (and the runner credential inside each), the
GitHub token and the webhook secret: the state database, the event log, the daemon's log, the
runners' logs, ``/metrics`` and ``rungar status``. While the runners run, no process's command
line holds a JIT config. The state files are 0600 whatever the umask the daemon ran with.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from rungar.cli.fake_runner import decode_jit_config
from rungar.model.machine import Created, CreateRequest, Refusal
from rungar.testing.fake_provider import GIB, FakeProvider
from tests.e2e.daemon_world import DaemonWorld
from tests.waiting import WAIT

SECRET = "whsec-scan-" + os.urandom(8).hex()
TOKEN = "emulator-pat"  # DaemonWorld's token file
JOBS = 3


class Recording(FakeProvider):
    """A fake that keeps every JIT config it was handed, to search for them afterwards."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.jit_configs: list[str] = []

    async def create(self, request: CreateRequest) -> Created | Refusal:
        self.jit_configs.append(request.jit_config)
        return await super().create(request)


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
        {"host": Recording("host", vcpus=64, memory_bytes=128 * GIB)},
        metrics=True,
        webhook_secret=SECRET,
    )
    # A loose umask, as a careless unit or shell might leave: the files must not follow it.
    old = os.umask(0o000)
    try:
        await w.start(fleet())
    finally:
        os.umask(old)
    yield w
    await w.stop()
    shutil.rmtree(root, ignore_errors=True)


def command_lines() -> Mapping[int, bytes]:
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                found[int(entry.name)] = (entry / "cmdline").read_bytes()
            except OSError:
                continue  # ended meanwhile
    return found


async def test_a_burst_leaves_no_jit_config_or_token_in_state_events_logs_or_metrics(
    world: DaemonWorld,
) -> None:
    await world.wait_for(lambda s: s and s["scale_sets"], "the scale set", WAIT)
    for n in range(JOBS):
        await world.queue_job(labels=["self-hosted", "linux"], name=f"burst-{n}", duration=60)
    status = await world.wait_for(
        lambda s: s and len([r for r in s["runners"] if r["state"] == "busy"]) == JOBS,
        "every job's runner busy",
        60,
    )
    fake = world.providers["host"].fake
    assert isinstance(fake, Recording)
    jit_configs = list(fake.jit_configs)
    assert len(jit_configs) >= JOBS
    credentials = [decode_jit_config(jit).credential for jit in jit_configs]

    secrets = [*jit_configs, *credentials, TOKEN, SECRET]
    for pid, line in command_lines().items():
        for jit in jit_configs:
            assert jit.encode() not in line, f"process {pid} has a JIT config on its command line"

    async with httpx.AsyncClient(timeout=WAIT) as client:
        metrics = (await client.get(f"http://127.0.0.1:{world.metrics_port}/metrics")).text
    human = (await world.rungar("status")).stdout
    state = world.root / "state"
    places: dict[str, bytes] = {
        "metrics": metrics.encode(),
        "status --json": repr(status).encode(),
        "status": human.encode(),
        "daemon log": (world.root / "daemon.log").read_bytes(),
    }
    for path in [*state.iterdir(), *world.root.glob("*.log")]:
        if path.is_file():
            places[str(path.relative_to(world.root))] = path.read_bytes()
    assert "state/state.db" in places and "state/events.jsonl" in places
    for where, content in places.items():
        for secret in secrets:
            assert secret.encode() not in content, f"a secret is in {where}"

    for name in ("state.db", "events.jsonl"):
        mode = stat.S_IMODE((state / name).stat().st_mode)
        assert mode == 0o600, f"{name} is {mode:o} under umask 000"
