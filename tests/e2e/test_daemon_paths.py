"""Relative paths in rungar.yaml and scale_sets.yaml mean "next to the file", wherever the daemon
is started: ``rungar serve`` run from another folder finds its token, state, socket and its
providers at ``unix:NAME.sock`` next to scale_sets.yaml, and serves a job end to end.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from rungar.testing.fake_provider import GIB, FakeProvider
from rungar.testing.github_emulator.model import JobSpec, JobState
from tests.e2e.daemon_world import DaemonWorld


def fleet() -> dict[str, Any]:
    return {
        "version": 1,
        "timing": {"reconcile_interval": "5s", "left_grace": "2s"},
        "providers": [
            {"name": "host1", "type": "runnerd", "runner": {"vcpus": 2, "memory": "1GiB"}},
        ],
        "scale_sets": [
            {
                "name": "linux",
                "labels": ["linux"],
                "max_runners": 2,
                "start_timeout": "30s",
                "providers": ["host1"],
            },
        ],
    }


async def test_a_daemon_started_from_another_folder_resolves_every_relative_path_next_to_its_files() -> (  # noqa: E501
    None
):
    root = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))  # short: socket paths are limited
    elsewhere = Path(tempfile.mkdtemp(prefix="rg-cwd-", dir="/tmp"))
    world = DaemonWorld(
        root,
        {"host1": FakeProvider("host1", vcpus=64, memory_bytes=128 * GIB)},
        relative_paths=True,
        cwd=elsewhere,
    )
    try:
        await world.start(fleet())  # answers on root/rungar.sock, written as "rungar.sock"
        world.emulator.state.queue_job(JobSpec(labels=("linux",), duration=1, memory_bytes=1))
        await world.wait_for(
            lambda s: (
                s
                and all(j.state is JobState.COMPLETED for j in world.emulator.state.jobs.values())
                and not s["runners"]
            ),
            "the job served by a runner on unix:host1.sock",
            60,
        )
        assert (root / "state" / "state.db").exists()
        assert (root / "state" / "events.jsonl").exists()
        assert list(elsewhere.iterdir()) == [], "nothing is made in the working directory"
    finally:
        await world.stop()
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(elsewhere, ignore_errors=True)
