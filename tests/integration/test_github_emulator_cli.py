"""``rungar github-emulator`` as a process: a client and ``rungar fake-runner`` work against it over
HTTP, driven through the control API as the demo does."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from pathlib import Path

import httpx
from starlette.routing import Route

from rungar.github.auth import PatAuth
from rungar.github.service import ScaleSetGitHub
from rungar.testing.github_emulator import InstantClock
from rungar.testing.github_emulator.harness import scale_set
from tests.waiting import WAIT


async def test_the_emulator_process_serves_a_client_and_a_fake_runner_end_to_end() -> None:
    emulator = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "rungar.cli.github_emulator", "--long-poll", "0.3",
        "--clock-factor", "20",
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert emulator.stdout is not None
        # No --port: any free port, and its URL alone on the first line.
        base = (await asyncio.wait_for(emulator.stdout.readline(), timeout=WAIT)).decode().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", base), base
        org_url = f"{base}/octo-org"
        gh = ScaleSetGitHub(org_url, PatAuth("emulator-pat"), InstantClock())
        async with httpx.AsyncClient(base_url=base) as control:
            scale_set_id = await gh.ensure_scale_set(scale_set())
            session = await gh.client.create_session(scale_set_id, "host")
            await gh.client.get_message(session, 0, 3)
            job = await control.post(
                "/_fake/jobs", json={"labels": ["self-hosted", "rungar"], "duration": 2, "cpu": 0.2}
            )
            assert job.status_code == 201
            message = await gh.client.get_message(session, 0, 3)
            assert message is not None and [j.kind for j in message.jobs] == ["JobAssigned"]
            await gh.client.delete_message(session, message.message_id)
            _, jit = await gh.generate_jit_config(scale_set_id, "linux-1")
            argv = ["-m", "rungar.cli.fake_runner", "--max-wait", "20"]
            runner = await asyncio.create_subprocess_exec(
                sys.executable,
                *argv,
                env={**os.environ, "ACTIONS_RUNNER_INPUT_JITCONFIG": jit},
                stdout=asyncio.subprocess.PIPE,
            )
            out, _ = await asyncio.wait_for(runner.communicate(), timeout=60)
            assert runner.returncode == 0, out.decode()
            started = await gh.client.get_message(session, message.message_id, 3)
            assert started is not None
            kinds = [j.kind for j in started.jobs]
            assert kinds in (["JobStarted", "JobCompleted"], ["JobStarted"])
            state = (await control.get("/_fake/state")).json()
            assert state["jobs"]["completed"] == 1 and state["runners"] == []
            await gh.client.delete_session(scale_set_id, session.session_id)
        await gh.aclose()
    finally:
        if emulator.returncode is None:
            os.kill(emulator.pid, signal.SIGINT)
            await asyncio.wait_for(emulator.wait(), timeout=WAIT)


def test_the_emulator_also_runs_in_a_thread_for_sync_callers() -> None:
    from rungar.testing.github_emulator import GitHubEmulator

    emu = GitHubEmulator()
    base = emu.start_in_thread()
    try:
        state = httpx.get(f"{base}/_fake/state", timeout=WAIT).json()
        assert state["jobs"]["queued"] == 0
        created = httpx.post(f"{base}/_fake/jobs", json={"labels": ["x"]}, timeout=WAIT)
        assert created.status_code == 201
    finally:
        emu.stop_thread()


def test_the_emulators_help_and_its_page_describe_every_control_route() -> None:
    # Broken once (a route added to ControlRoutes and nowhere else): fails naming it.
    from rungar.cli.github_emulator import CONTROL_API
    from rungar.testing.github_emulator import GitHubEmulator

    page = (Path(__file__).resolve().parents[2] / "docs" / "github-emulator.md").read_text()
    emulator = GitHubEmulator()
    routes = [
        (method, route.path)
        for route in emulator.app.routes
        if isinstance(route, Route) and route.path.startswith("/_fake/")
        for method in sorted(route.methods or ())
        if method != "HEAD"
    ]
    assert len(routes) >= 11
    for method, path in routes:
        fixed = path.split("{")[0]  # what comes before the first parameter
        in_help = [line for line in CONTROL_API.splitlines() if f"BASE{fixed}" in line]
        assert any(method in line for line in in_help), f"--help lacks {method} {path}"
        assert f"`{method} {fixed}" in page, f"docs/github-emulator.md lacks {method} {path}"
    words = " ".join(CONTROL_API.split())
    assert "the job_id in a provider's Create hints is this jobId" in words


async def test_the_emulator_process_serves_https_under_its_public_host_name(
    tmp_path: Path,
) -> None:
    """``--tls-cert``/``--tls-key``: HTTPS with the given certificate; ``--public-host``: the
    name in the URL it prints (a client reaches it at the bound address with that name's
    certificate)."""
    import ssl

    import trustme

    ca = trustme.CA()
    ca.issue_cert("github.test", "127.0.0.1").private_key_and_cert_chain_pem.write_to_path(
        str(tmp_path / "server.pem")
    )
    pem = str(tmp_path / "server.pem")
    emulator = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "rungar.cli.github_emulator", "--tls-cert", pem, "--tls-key", pem,
        "--public-host", "github.test",
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert emulator.stdout is not None
        base = (await asyncio.wait_for(emulator.stdout.readline(), timeout=WAIT)).decode().strip()
        match = re.fullmatch(r"https://github\.test:(\d+)", base)
        assert match, base
        context = ssl.create_default_context()
        ca.configure_trust(context)
        async with httpx.AsyncClient(verify=context) as client:
            answer = await client.get(f"https://127.0.0.1:{match[1]}/_fake/state")
        assert answer.status_code == 200
        async with httpx.AsyncClient() as untrusting:
            try:
                await untrusting.get(f"https://127.0.0.1:{match[1]}/_fake/state")
            except httpx.ConnectError as e:
                assert "CERTIFICATE_VERIFY_FAILED" in str(e)
            else:
                raise AssertionError("a client without the CA was served")
    finally:
        emulator.send_signal(signal.SIGTERM)
        await asyncio.wait_for(emulator.wait(), timeout=WAIT)
