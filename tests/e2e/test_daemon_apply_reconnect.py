"""``rungar apply`` moving a provider to a new address on a running ``rungar serve``: the daemon
reconnects it without a restart and keeps its runner (README, "Configuration").

The same through the admin socket in-process, with calls counted per endpoint and a call in
flight across the swap, is tests/integration/test_apply_reconnect.py; this one drives the real
daemon process (about 2 s).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from rungar.rpc.server import serve
from rungar.testing.fake_provider import GIB, FakeProvider
from tests.e2e.daemon_world import DaemonWorld


def fleet() -> dict[str, Any]:
    return {
        "version": 1,
        "timing": {"reconcile_interval": "5s", "left_grace": "2s"},
        "providers": [
            {"name": "compute1", "type": "runnerd", "runner": {"vcpus": 2, "memory": "1GiB"}},
        ],
        "scale_sets": [
            {
                "name": "linux",
                "labels": ["linux"],
                "max_runners": 2,
                "start_timeout": "10m",
                "providers": ["compute1"],
            },
        ],
    }


@pytest.fixture
async def world() -> Any:
    root = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))
    fake = FakeProvider("compute1", vcpus=64, memory_bytes=128 * GIB)
    w = DaemonWorld(root, {"compute1": fake}, boot_runners=False)
    await w.start(fleet())
    yield w
    await w.stop()
    shutil.rmtree(root, ignore_errors=True)


def runners(status: dict[str, Any] | None) -> list[str]:
    return sorted(r["name"] for r in (status or {}).get("runners", []))


async def test_apply_reconnects_a_moved_provider_and_keeps_its_runner(world: DaemonWorld) -> None:
    await world.queue_job(labels=["linux"], name="job-0", duration=60, memory_bytes=8 << 20)
    status = await world.wait_for(lambda s: len(runners(s)) == 1, "one runner", 30)
    (runner,) = runners(status)

    # The same machines, reached at a new address; the old one then goes away.
    moved = await serve(world.providers["compute1"], f"unix://{world.root}/moved.sock")
    world.servers.append(moved)
    config = yaml.safe_load((world.root / "scale_sets.yaml").read_text())
    config["providers"][0]["address"] = moved.address
    (world.root / "scale_sets.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    done = await world.rungar("apply", str(world.root / "scale_sets.yaml"))
    assert done.returncode == 0, done.stderr
    assert "~ provider compute1: reconnecting (address changed)" in done.stdout.splitlines()
    old = world.servers.pop(0)
    await old.stop(None)

    await world.reconcile()  # answered only by the new address
    status = await world.wait_for(
        lambda s: s is not None and s["providers"][0]["status"] != "UNREACHABLE",
        "compute1 reachable at its new address",
        10,
    )
    assert runners(status) == [runner]  # the runner made before still counts, once
    assert world.machines() == [runner]
    events = await world.rungar("events", "--json")
    assert '"reconnected"' in events.stdout
