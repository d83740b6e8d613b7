"""runnerd learns each job's size under Rungar, through the real stack: ``rungar serve``,
``runnerd serve`` with the process runtime running ``rungar fake-runner``, and the GitHub
emulator (docs/learning.md).

Jobs of known memory in two workflows, some failing on GitHub while their runner exits 0, run
through Rungar onto one runnerd host. runnerd's history must then hold every job with the
conclusion GitHub has (none ``cancelled``: the test cancels nothing), each peak within 10 % of
what its runner allocated; ``runnerctl sizing`` must advise the profile and ``runnerctl jobs``
list them; and under measured admission the next runner must reserve a prediction from those
runs, not its cap. Timing is compressed (samples every 0.2 s, a 5 s reconcile pass) and the
history and runnerd's API are polled in this process, so it takes well under a minute.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rungar.model.machine import conclusion_from_github
from rungar.testing.github_emulator.model import JobState
from tests.e2e.daemon_world import DaemonWorld
from tests.waiting import WAIT, accepting, until

MIB = 1024**2
LABEL = "e2e-learn"
# (workflow, job, memory, GitHub's result) for 12 jobs: two workflows, two sizes, two failures.
JOBS = (
    [("ci.yml", "build", 320 * MIB, "succeeded")] * 5
    + [
        ("ci.yml", "build", 320 * MIB, "failed"),
        ("e2e.yml", "integration", 640 * MIB, "failed"),
    ]
    + [("e2e.yml", "integration", 640 * MIB, "succeeded")] * 5
)


def runnerd_toml(host: Path) -> str:
    python = json.dumps(sys.executable)
    return f"""
[host]
slice = "rungar-e2e-{uuid.uuid4().hex[:8]}.slice"
memory_max = "8G"
admission = "measured"
runtime = "process"
state_dir = "{host}"
disk_reserve = "64M"
disk_per_runner = "16M"
sample_interval = "0.2s"
exit_grace = "3s"

[profiles.ci]
command = [{python}, "-m", "rungar.cli.fake_runner"]
cpus = 1
memory = "1G"
slots = 6
"""


def fleet(host: Path) -> dict[str, Any]:
    return {
        "version": 1,
        "timing": {
            "reconcile_interval": "5s",
            "backoff_first": "1s",
            "backoff_max": "2s",
            "left_grace": "2s",
        },
        "providers": [
            {"name": "host1", "type": "runnerd", "address": f"unix://{host}/provider.sock"}
        ],
        "scale_sets": [
            {
                "name": "ci",
                "labels": [LABEL],
                "max_runners": 6,
                "start_timeout": "30s",
                "providers": [{"name": "host1", "runner": {"profile": "ci"}}],
            }
        ],
    }


class Host:
    """``runnerd serve`` in its own process, read in this one: its history and its API."""

    def __init__(self, root: Path) -> None:
        self.dir = root / "host1"
        self.dir.mkdir()
        self.config = self.dir / "runnerd.toml"
        self.config.write_text(runnerd_toml(self.dir))
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = (self.dir / "runnerd.log").open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "runnerd.cli", "serve", "-c", str(self.config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
            start_new_session=True,
        )

    async def wait_ready(self) -> None:

        def ready() -> bool:
            assert self.process is not None and self.process.poll() is None, self.log()
            return accepting(self.dir / "provider.sock") and accepting(self.dir / "runnerd.sock")

        await until(ready, "started runnerd", every=0.1)

    def recorded(self) -> list[dict[str, Any]]:
        from runnerd.history import History

        path = self.dir / "history.db"
        if not path.exists():
            return []
        history = History(path, read_only=True)
        try:
            return history.recorded_since(0.0)
        finally:
            history.close()

    async def status(self) -> dict[str, Any]:
        transport = httpx.AsyncHTTPTransport(uds=str(self.dir / "runnerd.sock"))
        async with httpx.AsyncClient(transport=transport, base_url="http://runnerd") as client:
            answer = await client.get("/status")
        answer.raise_for_status()
        result: dict[str, Any] = answer.json()
        return result

    def runnerctl(self, capsys: pytest.CaptureFixture[str], *args: str) -> Any:
        """``runnerctl -c runnerd.toml ARGS --json``, run in this process: it only reads."""
        from runnerd import ctl

        capsys.readouterr()
        assert ctl.main(["-c", str(self.config), *args, "--json"]) == 0
        return json.loads(capsys.readouterr().out)

    async def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            await asyncio.to_thread(self.process.wait, 30)

    def log(self) -> str:
        path = self.dir / "runnerd.log"
        return path.read_text()[-3000:] if path.exists() else ""


@pytest.fixture
async def stack() -> AsyncIterator[tuple[DaemonWorld, Host]]:
    root = Path(tempfile.mkdtemp(prefix="rungar-learn-"))
    host = Host(root)
    world = DaemonWorld(root, {}, clock_factor=10)
    try:
        host.start()
        await host.wait_ready()
        await world.start(fleet(host.dir))
        yield world, host
    finally:
        await world.stop()
        await host.stop()
        if not os.environ.get("KEEP"):
            shutil.rmtree(root, ignore_errors=True)


async def eventually(check: Any, what: str, seconds: float, host: Host) -> Any:
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while loop.time() < end:
        found = check()
        if found:
            return found
        await asyncio.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}; runnerd's log ends: {host.log()}")


async def test_runnerd_records_every_job_with_githubs_conclusion_and_predicts_the_next(
    stack: tuple[DaemonWorld, Host], capsys: pytest.CaptureFixture[str]
) -> None:
    world, host = stack
    queued = {}
    for workflow, name, memory, result in JOBS:
        job = await world.queue_job(
            labels=[LABEL],
            repository="octo-org/app",
            workflow=workflow,
            name=name,
            duration=10.0,  # 1 s of real time at the emulator's 10x clock: 5 samples
            memory_bytes=memory,
            result=result,
        )
        queued[str(job["jobId"])] = (workflow, name, memory)
    rows = await eventually(
        lambda: (found := host.recorded()) and len(found) >= len(JOBS) and found,
        f"runnerd to record {len(JOBS)} jobs",
        90,
        host,
    )
    github = world.emulator.state.jobs
    assert all(github[job_id].state is JobState.COMPLETED for job_id in queued)
    assert sorted(r["job_id"] for r in rows) == sorted(queued)
    for row in rows:
        workflow, name, memory = queued[row["job_id"]]
        conclusion = conclusion_from_github(github[row["job_id"]].result)
        assert conclusion is not None
        assert (row["workflow"], row["job_name"]) == (f".github/workflows/{workflow}", name)
        assert (row["result"], row["branch"]) == (conclusion.value, "main")
        assert row["exit_code"] == 0  # a failed job's runner exits 0 all the same
        assert abs(row["peak_memory"] - memory) <= 0.1 * memory, (row, memory)
    assert sorted(r["result"] for r in rows).count("failed") == 2
    assert not [r for r in rows if r["result"] == "cancelled"]

    listed = host.runnerctl(capsys, "jobs")
    assert sorted(e["id"] for e in listed) == sorted(queued)
    sizing = host.runnerctl(capsys, "sizing")
    (profile,) = sizing["profiles"]
    assert (profile["profile"], profile["runs"]) == ("ci", len(JOBS))
    assert profile["action"] != "too_few" and profile["need"] is not None, profile["line"]

    await world.queue_job(
        labels=[LABEL],
        repository="octo-org/app",
        workflow="e2e.yml",
        name="integration",
        duration=10.0,
        memory_bytes=640 * MIB,
    )
    runner = None
    loop = asyncio.get_running_loop()
    end = loop.time() + WAIT
    while runner is None and loop.time() < end:
        runners = (await host.status())["runners"]
        runner = next((r for r in runners if r["state"] == "running"), None)
        await asyncio.sleep(0.2)
    assert runner is not None, host.log()
    assert not runner["basis"].startswith("its cap"), runner["basis"]
    assert "peak" in runner["basis"] and runner["reserved"] < runner["cap"]
