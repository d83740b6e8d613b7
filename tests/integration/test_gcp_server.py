"""The cloud provider servers as processes: settings files, serving, exit codes."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rungar.model.labels import installation_selector
from rungar.rpc.client import GrpcProvider
from rungar.testing.gce_fake import GceFake


def run_server(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("module", ["rungar_gcp.server", "rungar_aws.server"])
def test_bad_settings_exit_2_naming_every_problem(module: str, tmp_path: Path) -> None:
    config = tmp_path / "provider.yaml"
    config.write_text("bogus: 1\n")
    done = run_server(module, "--config", str(config), "--listen", f"unix://{tmp_path}/p.sock")
    assert done.returncode == 2
    assert "bogus: unknown key" in done.stderr and "installation: required" in done.stderr


def test_without_listen_or_a_plugin_socket_the_server_refuses(tmp_path: Path) -> None:
    config = tmp_path / "gcp.toml"
    config.write_text(
        'project = "p"\nzones = ["us-central1-a"]\ninstallation = "gh-1"\n'
        'anonymous = true\nendpoint = "http://127.0.0.1:9"\n'
    )
    done = run_server("rungar_gcp.server", "--config", str(config))
    assert done.returncode == 2 and "--listen is required" in done.stderr


async def test_the_gcp_server_serves_the_provider_on_a_unix_socket(tmp_path: Path) -> None:
    with GceFake() as fake:
        config = tmp_path / "gcp.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "project": fake.project,
                    "zones": ["us-central1-a"],
                    "installation": "gh-1",
                    "endpoint": fake.endpoint,
                    "anonymous": True,
                }
            )
        )
        sock = tmp_path / "gcp.sock"
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "rungar_gcp.server",
            "--config",
            str(config),
            "--listen",
            f"unix://{sock}",
        )
        try:
            for _ in range(200):
                if sock.exists():
                    break
                await asyncio.sleep(0.05)
            client = GrpcProvider("gcp", f"unix://{sock}", timeout=10)
            info = await client.info()
            assert info.kind == "gcp"
            assert await client.list(installation_selector("gh-1")) == []
            await client.close()
        finally:
            proc.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(proc.wait(), 20) == 0
