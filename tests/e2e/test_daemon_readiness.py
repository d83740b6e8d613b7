"""Readiness as a service manager and a script see it: ``rungar serve`` under a NOTIFY_SOCKET
(as systemd starts a ``Type=notify`` unit), ``rungar status --wait-ready`` started before the
daemon, and the metrics listener's ``/healthz`` and ``/readyz``.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rungar.testing.fake_provider import GIB, FakeProvider
from tests.e2e.daemon_world import DaemonWorld


def fleet() -> dict[str, Any]:
    return {
        "version": 1,
        "providers": [{"name": "host", "type": "runnerd", "runner": {"vcpus": 1}}],
        "scale_sets": [
            {"name": "linux", "labels": ["linux"], "max_runners": 2, "providers": ["host"]},
            {"name": "arm", "labels": ["arm"], "max_runners": 2, "providers": ["host"]},
        ],
    }


@pytest.fixture
async def root() -> AsyncIterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))  # unix socket paths are short
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


async def received(sock: socket.socket, until: str, seconds: float = 30) -> list[str]:
    """The datagrams sent to the notify socket, up to and including one containing ``until``."""
    loop = asyncio.get_running_loop()
    messages: list[str] = []
    async with asyncio.timeout(seconds):
        while not any(until in m for m in messages):
            messages.append((await loop.sock_recv(sock, 4096)).decode())
    return messages


async def test_serve_tells_systemd_it_is_ready_once_every_scale_set_listens(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(root / "notify"))
    notify.setblocking(False)
    monkeypatch.setenv("NOTIFY_SOCKET", str(root / "notify"))  # the daemon inherits it
    world = DaemonWorld(
        root, {"host": FakeProvider("host", vcpus=8, memory_bytes=8 * GIB)}, 10, metrics=True
    )
    # Asked before the daemon exists: waits for it to answer, then for it to be ready.
    waiter = asyncio.ensure_future(
        asyncio.to_thread(
            subprocess.run,
            [
                sys.executable,
                "-m",
                "rungar.cli.main",
                "status",
                "--wait-ready",
                "--timeout",
                "60s",
                "--json",
                "--socket",
                world.socket,
            ],
            capture_output=True,
            text=True,
            timeout=90,
        )
    )
    try:
        await world.start(fleet())
        messages = await received(notify, "READY=1")
        done = await waiter
        assert done.returncode == 0, done.stderr
        document = json.loads(done.stdout)
        assert document["daemon"]["ready"] is True
        assert {s["status"] for s in document["scale_sets"]} == {"LISTENING"}

        ready = messages[-1].splitlines()
        assert ready[0] == "READY=1"
        assert ready[1] == "STATUS=ready: 2 of 2 scale sets have their message session"
        assert sum("READY=1" in m for m in messages) == 1
        assert all(m.startswith(("STATUS=", "READY=1")) for m in messages)
        assert messages[0].startswith("STATUS=0 of 2 scale sets"), messages

        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{world.metrics_port}") as http:
            healthz, readyz = await http.get("/healthz"), await http.get("/readyz")
        assert healthz.status_code == 200
        assert readyz.status_code == 200 and readyz.text.startswith("ready: 2 of 2")

        await world.stop()
        stopping = await received(notify, "STOPPING=1", seconds=30)
        assert stopping[-1].startswith("STOPPING=1")
    finally:
        waiter.cancel()
        await world.stop()
        notify.close()
