"""``rungar apply`` moving a provider to a new address on a running ``rungar serve``: the daemon
reconnects it without a restart and keeps its runner (docs/scale-sets.md).

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


async def test_apply_of_another_file_than_the_daemon_runs_from_is_refused_and_changes_nothing(
    world: DaemonWorld,
) -> None:
    other = world.root / "other.yaml"
    config = yaml.safe_load((world.root / "scale_sets.yaml").read_text())
    config["scale_sets"][0]["max_runners"] = 1
    other.write_text(yaml.safe_dump(config, sort_keys=False))
    for dry in ((), ("--dry-run",)):
        refused = await world.rungar("apply", str(other), *dry)
        assert refused.returncode == 2, refused.stdout
        assert f"{other}: this daemon runs from {world.root / 'scale_sets.yaml'}" in refused.stderr
    status = await world.status()
    assert status is not None and status["scale_sets"][0]["max"] == 2
    assert status["daemon"]["config_path"] == str(world.root / "scale_sets.yaml")


async def test_doctor_says_when_the_daemon_runs_another_file_than_rungar_yaml_names(
    world: DaemonWorld,
) -> None:
    from rungar.daemon.settings import load_settings
    from rungar.doctor.checks import daemon_file_checks

    settings = load_settings(str(world.root / "rungar.yaml"))
    (same,) = await daemon_file_checks(settings)
    assert same.level == "ok", same
    # rungar.yaml now names another file; the daemon still runs the first until restarted.
    other = world.root / "other.yaml"
    other.write_text((world.root / "scale_sets.yaml").read_text())
    text = (world.root / "rungar.yaml").read_text()
    (world.root / "rungar.yaml").write_text(text.replace("scale_sets.yaml", "other.yaml"))
    (differs,) = await daemon_file_checks(load_settings(str(world.root / "rungar.yaml")))
    assert differs.level == "warn"
    assert differs.message == (
        f"the daemon runs from {world.root / 'scale_sets.yaml'}, but rungar.yaml names {other}: "
        f"a restart switches to {other}"
    )
