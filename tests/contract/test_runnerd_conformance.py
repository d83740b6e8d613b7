"""runnerd passes the provider conformance kit over loopback mTLS and over its unix socket.

Real runners: the process runtime starts ``python -c`` sleepers; the kit fills the host until
runnerd refuses FULL (its profile's slots), asks for a runner larger than the host (INVALID),
and checks that concurrent creates never exceed what runnerd holds.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trustme
from runnerd.config import parse_config
from runnerd.daemon import open_daemon
from runnerd.running import Daemon

from rungar.clock import SystemClock
from rungar.model.provider import Provider
from rungar.model.runner_block import RunnerBlock
from rungar.rpc.client import GrpcProvider
from rungar.rpc.server import serve
from rungar.rpc.tls import ClientTls, ServerTls
from rungar.testing.conformance import check_provider
from tests.waiting import WAIT

G = 1024**3
CAPACITY_RUNNER = RunnerBlock(vcpus=1, memory_bytes=64 * 1024**2)
IMPOSSIBLE_RUNNER = RunnerBlock(vcpus=1, memory_bytes=64 * G)
SLEEP = "import time\ntime.sleep(120)\n"


@pytest.fixture
async def daemon(tmp_path: Path) -> AsyncIterator[Daemon]:
    text = f"""
[host]
slice = "rdconf{uuid.uuid4().hex[:8]}.slice"
memory_max = "1G"
cpus = 2
state_dir = "{tmp_path / "state"}"
exit_grace = "0.5s"  # its runners sleep on after a completed job: the grace runs out

[profiles.conformance]
command = [{json.dumps(sys.executable)}, "-c", {json.dumps(SLEEP)}]
cpus = 1
memory = "128M"
slots = 3
"""
    d = await open_daemon(parse_config(text), SystemClock(), config_text=text)
    yield d
    for name in list(d.provider.runners):
        await d.provider.delete(name)
    await d.close()  # stops the runners and removes the slice cgroup it made


async def test_runnerd_conforms_over_loopback_mtls(daemon: Daemon, tmp_path: Path) -> None:
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    for name, who in (("server", "runnerd.test"), ("client", "rungar.client")):
        cert = ca.issue_cert(who)
        cert.cert_chain_pems[0].write_to_path(str(tmp_path / f"{name}.pem"))
        cert.private_key_pem.write_to_path(str(tmp_path / f"{name}.key"))
    tls = ServerTls(
        str(tmp_path / "server.pem"), str(tmp_path / "server.key"), str(tmp_path / "ca.pem")
    )
    server = await serve(daemon.provider, "127.0.0.1:0", tls=tls)
    client_tls = ClientTls(
        str(tmp_path / "ca.pem"),
        str(tmp_path / "client.pem"),
        str(tmp_path / "client.key"),
        "runnerd.test",
    )

    async def make_client() -> Provider:
        return GrpcProvider("runnerd", server.address, tls=client_tls, timeout=WAIT)

    try:
        passed = await check_provider(
            make_client,
            capacity_runner=CAPACITY_RUNNER,
            impossible_runner=IMPOSSIBLE_RUNNER,
            max_fill=8,
        )
    finally:
        await server.stop(None)
    assert {"full_refusal", "invalid_refusal", "concurrent_creates", "refusal_messages"} <= set(
        passed
    )


async def test_runnerd_conforms_over_its_unix_socket(daemon: Daemon, tmp_path: Path) -> None:
    server = await serve(daemon.provider, f"unix://{tmp_path}/provider.sock")

    async def make_client() -> Provider:
        return GrpcProvider("runnerd", server.address, timeout=WAIT)

    try:
        passed = await check_provider(
            make_client,
            capacity_runner=CAPACITY_RUNNER,
            impossible_runner=IMPOSSIBLE_RUNNER,
            max_fill=8,
        )
    finally:
        await server.stop(None)
    assert "repeated_create" in passed
