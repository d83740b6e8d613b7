"""The systemd units in config/systemd/ run commands that exist, with the timings and hardening
the README promises; ``systemd-analyze verify`` finds nothing wrong where it is installed."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.test_docs_readme import commands, make_targets, parsers, problem

ROOT = Path(__file__).resolve().parents[2]
UNITS = ROOT / "config" / "systemd"

Unit = dict[str, list[tuple[str, str]]]


def read_unit(path: Path) -> Unit:
    """Sections of a unit file as (key, value) pairs in order; a key may repeat."""
    unit: Unit = {}
    section = ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            unit.setdefault(section, [])
            continue
        key, _, value = line.partition("=")
        unit[section].append((key.strip(), value.strip()))
    return unit


def values(unit: Unit, section: str, key: str) -> list[str]:
    return [v for k, v in unit.get(section, []) if k == key]


def one(unit: Unit, section: str, key: str) -> str:
    found = values(unit, section, key)
    assert len(found) == 1, f"[{section}] {key}: {found}"
    return found[0]


@pytest.fixture(scope="module")
def cli_parsers() -> dict[str, argparse.ArgumentParser]:
    return parsers()


@pytest.mark.parametrize(
    ("unit_name", "command"),
    [
        ("rungar.service", "rungar serve -c /etc/rungar/rungar.yaml"),
        ("runnerd.service", "runnerd serve -c /etc/runnerd/runnerd.toml"),
    ],
)
def test_each_service_runs_its_daemon_and_restarts_and_stops_as_documented(
    unit_name: str, command: str
) -> None:
    unit = read_unit(UNITS / unit_name)
    exec_start = one(unit, "Service", "ExecStart")
    assert Path(exec_start.split()[0]).name + " " + exec_start.split(" ", 1)[1] == command
    assert one(unit, "Service", "Restart") == "on-failure"
    assert one(unit, "Service", "RestartSec") == "5"
    assert one(unit, "Service", "TimeoutStopSec") == "45"
    assert one(unit, "Install", "WantedBy") == "multi-user.target"


@pytest.mark.parametrize("unit_name", ["rungar.service", "runnerd.service"])
def test_every_command_a_unit_runs_exists(
    unit_name: str, cli_parsers: dict[str, argparse.ArgumentParser]
) -> None:
    unit = read_unit(UNITS / unit_name)
    lines = [
        f"{key}={value}"
        for key, value in unit["Service"]
        if key in ("ExecStart", "ExecStartPre", "ExecStop", "ExecReload")
    ]
    block = "\n".join(lines).replace("ExecStartPre=", "ExecStart=")
    found = list(commands(f"```ini\n{block}\n```\n"))
    assert len(found) == len(lines)
    targets = make_targets((ROOT / "Makefile").read_text(encoding="utf-8"))
    assert [p for argv in found if (p := problem(argv, cli_parsers, targets))] == []


def test_the_daemon_runs_unprivileged_in_a_sandbox() -> None:
    unit = read_unit(UNITS / "rungar.service")
    assert one(unit, "Service", "User") == "rungar"
    assert one(unit, "Service", "NoNewPrivileges") == "yes"
    assert one(unit, "Service", "CapabilityBoundingSet") == ""
    assert one(unit, "Service", "ProtectSystem") == "strict"
    assert one(unit, "Service", "RuntimeDirectory") == "rungar"  # the admin socket's folder
    assert one(unit, "Service", "StateDirectory") == "rungar"
    assert "@system-service" in values(unit, "Service", "SystemCallFilter")


def test_runnerd_runs_under_its_slice_with_a_memory_budget() -> None:
    service = read_unit(UNITS / "runnerd.service")
    assert one(service, "Unit", "Requires") == "runnerd.slice"
    assert one(service, "Service", "Group") == "runnerd"  # the provider socket's group
    assert one(service, "Service", "UMask") == "0007"
    slice_unit = read_unit(UNITS / "runnerd.slice")
    assert one(slice_unit, "Slice", "MemoryMax")


def test_systemd_finds_nothing_wrong_in_the_units(tmp_path: Path) -> None:
    verify = shutil.which("systemd-analyze")
    if verify is None:
        pytest.skip("systemd-analyze is not installed")
    # verify checks that ExecStart's program exists: point the units at this environment's.
    bin_dir = Path(sys.executable).parent
    if not (bin_dir / "rungar").exists() or not (bin_dir / "runnerd").exists():
        pytest.skip("the rungar and runnerd console scripts are not installed here")
    for unit in UNITS.iterdir():
        if unit.suffix == ".conf":  # sysusers.d and tmpfiles.d entries: not units
            continue
        text = unit.read_text(encoding="utf-8").replace("/usr/local/bin/", f"{bin_dir}/")
        (tmp_path / unit.name).write_text(text, encoding="utf-8")
    names = sorted(str(p) for p in tmp_path.iterdir())
    done = subprocess.run([verify, "verify", *names], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and not (done.stdout + done.stderr).strip(), (
        done.stdout + done.stderr
    )
