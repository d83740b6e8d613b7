"""A connection flood against a running ``rungar serve`` with the default 1,024 open files.

The daemon runs in its own process with ``RLIMIT_NOFILE`` at 1,024, what systemd gives a unit
that sets no ``LimitNOFILE``. Thousands of connections are opened to its webhook port and held,
sending nothing, as an attacker who needs no signature would. While they are held, a valid
signed delivery, ``rungar status`` (the admin socket), a whole reconcile pass (the provider
channel and GitHub calls) and ``/metrics`` must each answer within 1 s, and the log must stay
short. Before the listeners were bounded and given their own thread, about 1,100 such
connections exhausted the daemon's files: deliveries, status and metrics went unanswered and
every refused accept logged a traceback.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import resource
import shutil
import socket
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rungar.rpc.admin_client import AdminClient
from rungar.testing.fake_provider import GIB, FakeProvider
from tests.e2e.daemon_world import DaemonWorld, sample_key
from tests.waiting import WAIT

SECRET = "whsec-flood-test"
ANSWER_WITHIN = 1.0  # seconds: a deadline on each call, not a measurement
LOG_LINES_ALLOWED = 100


def fleet() -> dict[str, Any]:
    return {
        "version": 1,
        "timing": {"reconcile_interval": "1h"},
        "providers": [
            {"name": "host", "type": "runnerd", "runner": {"vcpus": 2, "memory": "1GiB"}},
        ],
        "scale_sets": [
            {"name": "linux", "labels": ["linux"], "max_runners": 2, "providers": ["host"]},
        ],
    }


@pytest.fixture
async def world(request: pytest.FixtureRequest) -> AsyncIterator[DaemonWorld]:
    root = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))
    w = DaemonWorld(
        root,
        {"host": FakeProvider("host", vcpus=64, memory_bytes=128 * GIB)},
        metrics=True,
        webhook_secret=SECRET,
        open_files=getattr(request, "param", 1024),
    )
    await w.start(fleet())
    yield w
    await w.stop()
    shutil.rmtree(root, ignore_errors=True)


def hold_connections(port: int, count: int) -> list[socket.socket]:
    """``count`` connections to ``port`` that send nothing; the caller closes them."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < count + 256:  # this process holds the flood's end of every connection
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, count + 1024), hard))
    held = []
    for _ in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.connect_ex(("127.0.0.1", port))  # loopback: done, or done once accepted
        held.append(sock)
    return held


def signed_delivery(job_id: int) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(
        {
            "action": "queued",
            "workflow_job": {"id": job_id, "labels": ["self-hosted", "linux"]},
            "repository": {"full_name": "o/r"},
        }
    ).encode()
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return body, {
        "X-Hub-Signature-256": signature,
        "X-GitHub-Event": "workflow_job",
        "X-GitHub-Delivery": f"flood-{job_id}",
    }


async def answers_while_flooded(world: DaemonWorld, connections: int) -> None:
    """Hold ``connections`` idle connections and check every door still answers in time."""
    await world.wait_for(lambda s: s and s["scale_sets"], "the scale set", WAIT)
    log = world.root / "daemon.log"
    lines_before = len(log.read_text().splitlines())
    held = await asyncio.to_thread(hold_connections, world.webhook_port, connections)
    try:
        for job_id in (1, 2, 3):  # more than once: not a lucky first slot
            body, headers = signed_delivery(job_id)
            async with httpx.AsyncClient(timeout=ANSWER_WITHIN) as client:
                answer = await client.post(
                    f"http://127.0.0.1:{world.webhook_port}/webhook", content=body, headers=headers
                )
            assert answer.status_code == 202, answer.text
            async with AdminClient(world.socket) as admin:
                status = await asyncio.wait_for(admin.status(), ANSWER_WITHIN)
                # A whole pass: the provider channel (List) and GitHub calls included.
                passed = await asyncio.wait_for(admin.reconcile([]), ANSWER_WITHIN)
            assert status["scale_sets"][0]["name"] == "linux" and passed
            async with httpx.AsyncClient(timeout=ANSWER_WITHIN) as client:
                scraped = await client.get(f"http://127.0.0.1:{world.metrics_port}/metrics")
            assert scraped.status_code == 200
        accepted = sample_key("rungar_webhook_deliveries_total", {"outcome": "accepted"})
        assert f"{accepted} 3.0" in scraped.text
    finally:
        for sock in held:
            sock.close()
    lines = log.read_text().splitlines()[lines_before:]
    assert len(lines) < LOG_LINES_ALLOWED, lines[:5]
    assert not [line for line in lines if not line.startswith("{")], "every line is JSON"


@pytest.mark.parametrize("world", [256], indirect=True)
async def test_with_256_open_files_600_idle_connections_leave_every_door_answering(
    world: DaemonWorld,
) -> None:
    # The quick version: more idle connections than the daemon has files.
    await answers_while_flooded(world, 600)


@pytest.mark.long
async def test_a_delivery_status_and_metrics_answer_within_a_second_under_2000_idle_connections(
    world: DaemonWorld,
) -> None:
    await answers_while_flooded(world, 2000)
