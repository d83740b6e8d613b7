"""``rungar apply`` and ``--dry-run`` on a running ``rungar serve`` refuse a runner key that a
third-party plugin's Info does not declare, at FILE:LINE:COL with a did-you-mean, even when the
plugin's own ValidateRunner lets every key through (docs/scale-sets.md, "Runner blocks").

The plugin is a fake of another type (``acme``) that declares one key of its own, ``zone``,
beside the typed ones, and checks nothing in ValidateRunner; the daemon is the real process.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from rungar.testing.fake_provider import GIB, FakeProvider
from tests.e2e.daemon_world import DaemonWorld

FLEET = """\
version: 1
timing: { reconcile_interval: 5s }
providers:
  - name: acme1
    type: acme
    address: ADDRESS
    runner: { vcpus: 2, memory: 1GiB, zone: z1 }
scale_sets:
  - name: linux
    labels: [linux]
    max_runners: 3
    providers:
      - name: acme1
        runner: { RUNNER }
"""


class LaxPlugin(FakeProvider):
    """A plugin that declares its keys in Info but lets any key through ValidateRunner."""

    async def validate_runner(self, runner: Mapping[str, Any]) -> list[str]:
        return []


@pytest.fixture
async def world() -> Any:
    root = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))
    plugin = LaxPlugin("acme1", vcpus=64, memory_bytes=128 * GIB, kind="acme", extra_keys=("zone",))
    w = DaemonWorld(root, {"acme1": plugin}, boot_runners=False)
    await w.start(
        {
            "version": 1,
            "providers": [{"name": "acme1", "type": "acme", "runner": {"vcpus": 2}}],
            "scale_sets": [{"name": "linux", "max_runners": 2, "providers": ["acme1"]}],
        }
    )
    yield w
    await w.stop()
    shutil.rmtree(root, ignore_errors=True)


def write(world: DaemonWorld, runner: str) -> Path:
    path = world.root / "scale_sets.yaml"
    address = f"unix://{world.root}/acme1.sock"
    path.write_text(FLEET.replace("ADDRESS", address).replace("RUNNER", runner))
    return path


async def test_apply_refuses_a_runner_key_the_plugins_info_does_not_declare(
    world: DaemonWorld,
) -> None:
    path = write(world, "zonee: z2")
    line = path.read_text().splitlines().index("        runner: { zonee: z2 }") + 1
    expected = (
        f"{path}:{line}:19: scale_sets[linux].providers[acme1].runner.zonee: not a runner key "
        "provider acme1 (acme) declares in its Info; did you mean zone?"
    )
    for dry in (("--dry-run",), ()):
        refused = await world.rungar("apply", str(path), *dry)
        assert refused.returncode == 2, refused.stdout
        assert expected in refused.stderr.splitlines(), refused.stderr
    status = await world.status()
    assert status is not None and status["scale_sets"][0]["max"] == 2  # nothing applied
    # A declared key passes: the same file with the key spelled right applies.
    write(world, "zone: z2")
    done = await world.rungar("apply", str(path))
    assert done.returncode == 0, done.stderr
    status = await world.status()
    assert status is not None and status["scale_sets"][0]["max"] == 3
