"""The cloud provider servers as processes: settings files, serving, exit codes."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rungar.model.labels import installation_selector
from rungar.rpc.client import GrpcProvider
from rungar.rpc.plugin import SETTINGS_ENV
from rungar.testing.gce_fake import GceFake
from tests.waiting import WAIT, accepting, until


async def listening(proc: asyncio.subprocess.Process, sock: Path) -> None:
    """Until the server takes connections (its imports take a while on a busy machine)."""

    def ready() -> bool:
        assert proc.returncode is None, f"the server ended ({proc.returncode}) before listening"
        return accepting(sock)

    await until(ready, f"listened on {sock}")


def run_server(
    module: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=60, env=env
    )


def handed_over(tmp_path: Path, settings: dict[str, object]) -> dict[str, str]:
    """The environment of a plugin Rungar hands ``settings`` to."""
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(settings))
    return {**os.environ, SETTINGS_ENV: str(path)}


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
            await listening(proc, sock)
            client = GrpcProvider("gcp", f"unix://{sock}", timeout=WAIT)
            info = await client.info()
            assert info.kind == "gcp"
            assert await client.list(installation_selector("gh-1")) == []
            await client.close()
        finally:
            proc.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(proc.wait(), WAIT) == 0


def test_a_problem_in_handed_over_settings_names_the_scale_sets_provider(tmp_path: Path) -> None:
    env = handed_over(
        tmp_path,
        {"name": "gcp-eu", "project": "p", "zones": ["us-central1-a", "europe-west1-b"]},
    )
    done = run_server("rungar_gcp.server", "--listen", f"unix://{tmp_path}/p.sock", env=env)
    assert done.returncode == 2
    assert done.stderr == (
        "rungar-provider-gcp: settings from rungar (scale_sets.yaml provider gcp-eu): "
        "installation: required; zones: us-central1-a, europe-west1-b are not all in one region\n"
    )


def test_with_neither_settings_from_rungar_nor_config_the_server_refuses(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != SETTINGS_ENV}
    done = run_server("rungar_aws.server", "--listen", f"unix://{tmp_path}/p.sock", env=env)
    assert done.returncode == 2
    assert "--config" in done.stderr and SETTINGS_ENV in done.stderr


async def test_the_config_file_adds_only_the_endpoint_to_what_rungar_hands_over(
    tmp_path: Path,
) -> None:
    with GceFake() as fake:
        env = handed_over(
            tmp_path,
            {
                "name": "gcp-eu",
                "project": fake.project,
                "zones": ["us-central1-a"],
                "installation": "gh-1",
            },
        )
        config = tmp_path / "gcp.yaml"
        config.write_text(yaml.safe_dump({"endpoint": fake.endpoint, "anonymous": True}))
        sock = tmp_path / "gcp.sock"
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "rungar_gcp.server",
            "--config",
            str(config),
            "--listen",
            f"unix://{sock}",
            env=env,
        )
        try:
            await listening(proc, sock)
            client = GrpcProvider("gcp-eu", f"unix://{sock}", timeout=WAIT)
            assert (await client.info()).name == "gcp-eu"
            assert await client.list(installation_selector("gh-1")) == []
            await client.close()
        finally:
            proc.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(proc.wait(), WAIT) == 0
