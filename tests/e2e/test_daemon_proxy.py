"""``rungar serve`` where companies run it: GitHub (the emulator, serving HTTPS with a
certificate of a throwaway CA) reached only through a real forward proxy (Debian's squid,
tests/forward_proxy.py), and what the daemon says when the CA file or the proxy is wrong.

The emulator's host name, ``github.test``, is resolved by the proxy alone, and the emulator
records each request's TCP peer: a request went through the proxy exactly when its peer port
is the local port of one of the connections squid logged.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import ssl
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from rungar.testing.fake_provider import GIB, FakeProvider
from rungar.testing.github_emulator.model import JobState
from tests.e2e.daemon_world import DaemonWorld
from tests.forward_proxy import Squid, free_port
from tests.waiting import WAIT, until

GITHUB = "github.test"
# Retries at once, so a test sees the second failure in a second rather than after a minute.
QUICK_RETRIES = {
    "retry_first": 0.05,
    "retry_max": 0.1,
    "error_backoff_first": 0.2,
    "error_backoff_max": 0.5,
}


def fleet(**timing: str) -> dict[str, Any]:
    return {
        "version": 1,
        "timing": {"reconcile_interval": "5s", "left_grace": "2s", **timing},
        "providers": [
            {"name": "host", "type": "runnerd", "runner": {"vcpus": 2, "memory": "1GiB"}},
        ],
        "scale_sets": [
            {
                "name": "linux",
                "labels": ["linux"],
                "max_runners": 4,
                "start_timeout": "30s",
                "providers": ["host"],
            },
        ],
    }


@pytest.fixture
def root() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))  # unix socket paths are short
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def make_ca(root: Path) -> tuple[Path, Path]:
    """The emulator's certificate (key and chain in one PEM) and the CA that signed it."""
    ca = trustme.CA()
    ca.issue_cert(GITHUB, "127.0.0.1").private_key_and_cert_chain_pem.write_to_path(
        str(root / "server.pem")
    )
    ca.cert_pem.write_to_path(str(root / "ca.pem"))
    return root / "server.pem", root / "ca.pem"


def tls_options(server: Path, public_host: str = "") -> dict[str, Any]:
    return {"tls_cert_file": str(server), "tls_key_file": str(server), "public_host": public_host}


def providers() -> dict[str, FakeProvider]:
    return {"host": FakeProvider("host", vcpus=64, memory_bytes=128 * GIB)}


async def run_cli(env: dict[str, str], *args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "rungar.cli.main",
        *args,
        env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(process.communicate(), WAIT)
    assert process.returncode is not None
    return process.returncode, out.decode()


async def test_a_daemon_behind_a_proxy_runs_jobs_with_every_github_request_through_the_proxy(
    root: Path,
) -> None:
    server, ca = make_ca(root)
    squid = Squid(hosts={GITHUB: "127.0.0.1"})
    squid.start()
    proxy_env = {"HTTPS_PROXY": squid.url, "NO_PROXY": ""}
    world = DaemonWorld(
        root,
        providers(),
        emulator_options=tls_options(server, public_host=GITHUB),
        github={"ca_file": str(ca)},
        daemon_env=proxy_env,
        # The runners reach GitHub through the proxy too, as httpx reads the environment.
        runner_env={**proxy_env, "SSL_CERT_FILE": str(ca)},
        control_verify=ssl.create_default_context(cafile=str(ca)),
    )
    try:
        await world.start(fleet())
        for i in range(3):
            await world.queue_job(labels=["linux"], name=f"job-{i}", duration=1.0)
        jobs = world.emulator.state.jobs
        await until(
            lambda: len(jobs) == 3 and all(j.state is JobState.COMPLETED for j in jobs.values()),
            "every job to run through the proxy",
        )
        settings = str(root / "rungar.yaml")
        _, doctor = await run_cli(proxy_env, "doctor", "-c", settings, "--json")
        _, config = await run_cli(proxy_env, "config", "-c", settings, "--json")
    finally:
        await world.stop()
        logged = squid.close_and_read()
        shutil.rmtree(squid.folder, ignore_errors=True)
    rest = f"https://{GITHUB}:{world.emulator.port}/api/v3"
    shown = f"{squid.url} (HTTPS_PROXY)"
    # The daemon, doctor and config agree on the proxy, and say where it was named.
    started = [line for line in world.log_lines() if line.get("event") == "github.network"]
    assert [line["proxy"] for line in started] == [shown]
    checks = json.loads(doctor)["checks"]
    assert {
        "area": "network",
        "level": "ok",
        "message": f"proxy to {rest}: {shown}",
        "fix": "",
    } in checks
    github = [c for c in checks if c["area"] == "github"]
    assert github and all(c["level"] == "ok" for c in github), doctor
    assert json.loads(config)["network"]["shown"] == shown
    # Every request the emulator saw came over one of squid's connections: none went around.
    tunnels = [t for t in logged if t.method == "CONNECT"]
    assert {t.url for t in tunnels} == {f"{GITHUB}:{world.emulator.port}"}
    assert all(t.status == 200 for t in tunnels)
    through = {t.local_port for t in tunnels}
    requests = world.emulator.state.requests
    around = [r for r in requests if int(r["peer"].rsplit(":", 1)[1]) not in through]
    assert requests and around == []
    daemon_requests = [r for r in requests if r["client"]["userAgent"].startswith("rungar/")]
    assert {r["route"] for r in daemon_requests} >= {"A13", "MQ_GET"}  # JIT configs, polls
    assert "Traceback" not in (root / "daemon.log").read_text()


# A scale set's session is tried again soon after GitHub could not be reached.
QUICK_SESSIONS = {"session_retry_first": "0.3s", "session_retry_max": "1s"}


async def failures(world: DaemonWorld, text: str) -> list[dict[str, Any]]:
    """The scale set's failed tries to reach GitHub whose error holds ``text`` (its scale-set
    check, or its listener's turns): the second one is a retry."""

    def seen() -> list[dict[str, Any]]:
        found = [
            line
            for line in world.log_lines()
            if line.get("event") in ("github.session_failed", "github.listener_error")
            and text in line.get("error", "")
        ]
        return found if len(found) >= 2 else []  # falsy: not yet

    return await until(seen, f"two failed turns saying {text!r}")


async def test_a_ca_file_without_the_servers_ca_is_named_and_retried_without_a_traceback(
    root: Path,
) -> None:
    server, _ = make_ca(root)
    trustme.CA().cert_pem.write_to_path(str(root / "other-ca.pem"))
    world = DaemonWorld(
        root,
        providers(),
        emulator_options=tls_options(server),
        github={"ca_file": str(root / "other-ca.pem")},
        github_timing=QUICK_RETRIES,
        daemon_env={"HTTPS_PROXY": "", "https_proxy": ""},
    )
    try:
        await world.start(fleet(**QUICK_SESSIONS))
        found = await failures(world, "127.0.0.1's certificate is not trusted (")
    finally:
        await world.stop()
    error = found[0]["error"]
    assert f"trusted: the system's certificate authorities and {root}/other-ca.pem" in error
    assert f"check that {root}/other-ca.pem holds, in PEM, the CA that signed" in error
    assert found[1]["timestamp"] > found[0]["timestamp"]
    assert "Traceback" not in (root / "daemon.log").read_text()


async def test_a_dead_proxy_is_named_with_its_key_and_retried_without_a_traceback(
    root: Path,
) -> None:
    server, ca = make_ca(root)
    dead = f"http://127.0.0.1:{free_port()}"
    world = DaemonWorld(
        root,
        providers(),
        emulator_options=tls_options(server),
        github={"ca_file": str(ca), "proxy": dead},
        github_timing=QUICK_RETRIES,
        daemon_env={"NO_PROXY": "", "no_proxy": ""},
    )
    try:
        await world.start(fleet(**QUICK_SESSIONS))
        found = await failures(world, f"through the proxy {dead} (github.proxy in rungar.yaml)")
        code, doctor = await run_cli({}, "doctor", "-c", str(root / "rungar.yaml"), "--json")
    finally:
        await world.stop()
    assert (
        found[0]["error"]
        .split(": ", 1)[1]
        .startswith(f"cannot reach 127.0.0.1:{world.emulator.port} through the proxy {dead} ")
    )
    assert "check that the proxy runs" in found[0]["error"]
    assert "Traceback" not in (root / "daemon.log").read_text()
    checks = json.loads(doctor)["checks"]
    failed = [c for c in checks if c["area"] == "github" and c["level"] == "fail"]
    assert code == 1 and len(failed) == 1
    assert f"through the proxy {dead} (github.proxy in rungar.yaml)" in failed[0]["message"]
    assert failed[0]["fix"] == 'docs/operating.md, "Behind a proxy"'
