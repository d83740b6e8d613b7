"""``rungar serve`` behind fault proxies: one between the daemon and a real ``runnerd serve``
host (gRPC over TLS with a bearer token, on TCP), one between the daemon and the GitHub
emulator. The runners themselves reach the emulator directly (its ``runner_url``), so a fault
between the daemon and GitHub leaves running jobs alone, as a partition of the daemon's host
would.

Used by tests/e2e/test_daemon_partition.py; the proxy is :mod:`rungar.testing.fault_proxy`.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import trustme

from rungar.testing.fault_proxy import FaultProxy
from rungar.testing.github_emulator.model import JobState
from tests.e2e.daemon_world import DaemonWorld, free_port
from tests.e2e.test_runnerd_learning import Host

LABEL = "e2e-partition"
SERVER_NAME = "runnerd.test"


def runnerd_toml(host: Path, port: int, pki: dict[str, str], slots: int) -> str:
    python = json.dumps(sys.executable)
    return f"""
[host]
slice = "rungar-e2e-{uuid.uuid4().hex[:8]}.slice"
memory_max = "8G"
runtime = "process"
state_dir = "{host}"
disk_reserve = "64M"
disk_per_runner = "16M"
sample_interval = "1s"
exit_grace = "3s"
listen = "127.0.0.1:{port}"
tls_cert = "{pki["cert"]}"
tls_key = "{pki["key"]}"
token_file = "{pki["token"]}"

[profiles.ci]
command = [{python}, "-m", "rungar.cli.fake_runner"]
cpus = 0.25
memory = "256M"
slots = {slots}
"""


def make_pki(root: Path) -> dict[str, str]:
    """A throwaway CA, runnerd's certificate from it, and the bearer token runnerd expects."""
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(root / "ca.pem"))
    cert = ca.issue_cert(SERVER_NAME)
    cert.cert_chain_pems[0].write_to_path(str(root / "runnerd.pem"))
    cert.private_key_pem.write_to_path(str(root / "runnerd.key"))
    (root / "runnerd-token").write_text(uuid.uuid4().hex)
    (root / "runnerd-token").chmod(0o600)
    return {
        "ca": str(root / "ca.pem"),
        "cert": str(root / "runnerd.pem"),
        "key": str(root / "runnerd.key"),
        "token": str(root / "runnerd-token"),
    }


class PartitionStack:
    """The daemon, one runnerd host and the emulator, a :class:`FaultProxy` on each of the
    daemon's two links: :attr:`to_runnerd` and :attr:`to_github`."""

    def __init__(self, *, max_runners: int, clock_factor: float, timing: dict[str, str]):
        self.root = Path(tempfile.mkdtemp(prefix="rg-partition-", dir="/tmp"))
        self.max_runners = max_runners
        self.timing = timing
        self.pki = make_pki(self.root)
        self.runnerd_port = free_port()
        self.host = Host(self.root)
        self.host.config.write_text(
            runnerd_toml(self.host.dir, self.runnerd_port, self.pki, slots=max_runners + 2)
        )
        self.to_runnerd = FaultProxy("127.0.0.1", self.runnerd_port)
        self.world = DaemonWorld(self.root, {}, clock_factor=clock_factor)
        self.to_github: FaultProxy | None = None

    def fleet(self) -> dict[str, Any]:
        return {
            "version": 1,
            "timing": self.timing,
            "providers": [
                {
                    "name": "host1",
                    "type": "runnerd",
                    "address": self.to_runnerd.address,
                    "tls": {"ca_file": self.pki["ca"], "server_name": SERVER_NAME},
                    "token_file": self.pki["token"],
                }
            ],
            "scale_sets": [
                {
                    "name": "ci",
                    "labels": [LABEL],
                    "max_runners": self.max_runners,
                    "start_timeout": "30s",
                    "providers": [{"name": "host1", "runner": {"profile": "ci"}}],
                }
            ],
        }

    async def start(self) -> None:
        self.host.start()
        await self.host.wait_ready()
        await self.to_runnerd.start()
        emulator = self.world.emulator
        emulator.start_in_thread()
        emulator.options.runner_url = emulator.url_for("127.0.0.1")  # runners: straight there
        self.to_github = FaultProxy("127.0.0.1", emulator.port)
        await self.to_github.start()
        self.world.github["url"] = f"http://{self.to_github.address}/{emulator.options.owner}"
        await self.world.start(self.fleet())

    async def stop(self) -> None:
        try:
            await self.world.stop()
        finally:
            for proxy in (self.to_runnerd, self.to_github):
                if proxy is not None:
                    await proxy.stop()
            await self.host.stop()
            if not os.environ.get("KEEP"):
                shutil.rmtree(self.root, ignore_errors=True)

    async def queue(self, name: str, seconds: float) -> None:
        await self.world.queue_job(
            labels=[LABEL],
            repository="octo-org/app",
            workflow="ci.yml",
            name=name,
            duration=seconds,
        )

    def events(self) -> list[dict[str, Any]]:
        path = self.root / "state" / "events.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]

    def jobs_done(self) -> bool:
        jobs = self.world.emulator.state.jobs.values()
        return bool(jobs) and all(j.state is JobState.COMPLETED for j in jobs)

    async def runnerd_runners(self) -> list[dict[str, Any]]:
        runners: list[dict[str, Any]] = (await self.host.status())["runners"]
        return runners

    async def drained(self) -> bool:
        """Nothing left: no runner in the daemon, none on runnerd, no registration on GitHub."""
        status = await self.world.status()
        return (
            status is not None
            and not status["runners"]
            and not await self.runnerd_runners()
            and not self.world.emulator.state.runners
        )

    async def provider_words(self) -> str:
        """What ``rungar status`` says of the runnerd host and the scale set, one line each."""
        status = await self.world.status()
        assert status is not None
        words = [f"{p['status']} {p.get('error') or ''}" for p in status["providers"]]
        words += [f"{s['status']} {s['note']}" for s in status["scale_sets"]]
        return "\n".join(words)


def duplicates(events: list[dict[str, Any]]) -> dict[str, int]:
    """Runner names created more than once."""
    created = Counter(e["name"] for e in events if e["action"] == "created")
    return {name: n for name, n in created.items() if n > 1}


def adopted(events: list[dict[str, Any]]) -> list[str]:
    return [e["name"] for e in events if e["action"] == "adopted"]


def given_up(stack: PartitionStack) -> set[str]:
    """Runners whose create the daemon gave up on (the daemon's ``runner.not_placed`` lines)."""
    return {
        line["runner"]
        for line in stack.world.log_lines()
        if line.get("event") == "runner.not_placed"
    }


def readopted(events: list[dict[str, Any]], given_up: set[str]) -> list[str]:
    """Runners adopted after the daemon had removed them (a deletion undone), or whose create it
    had given up on (``given_up``: a machine it let go of before it was even made)."""
    removed: set[str] = set()
    found = []
    for e in events:
        if e["action"] == "removed":
            removed.add(e["name"])
        elif e["action"] == "adopted" and e["name"] in removed | given_up:
            found.append(e["name"])
    return found


def left_behind(events: list[dict[str, Any]]) -> list[str]:
    """Machines of creates given up on that appeared afterwards, and were deleted."""
    return [e["name"] for e in events if e["action"] == "left_behind"]


async def run_load(stack: PartitionStack, jobs: int, every: float, seconds: float) -> None:
    """A steady load: one job of ``seconds`` (emulated) every ``every`` real seconds."""
    for i in range(jobs):
        await stack.queue(f"job-{i}", seconds)
        if i + 1 < jobs:
            await asyncio.sleep(every)  # the load's pace, not a wait for something
