"""``rungar simulate`` given a fleet's own files — the demo's folder, or the daemon's ``-c``
settings — finds each runnerd host's runnerd.toml and history and maps the history's profiles
to scale sets by itself: no models file, no ``--scale-set`` (docs/simulate.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from string import Template

import pytest
import yaml
from runnerd.history import JobEnd, JobKey, JobStart
from runnerd.history_generate import GeneratedJob, write_history

from rungar.demo.stack import CLOUD_PLACEHOLDERS, _without_aws

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "demo"
M = 1024**2
T0 = 1_800_000_000.0


def demo_folder(root: Path) -> Path:
    """A folder laid out as ``rungar demo --keep`` leaves it, with host1's history written."""
    values = {"DIR": str(root), "BIN": str(Path(sys.executable).parent), **CLOUD_PLACEHOLDERS}
    scale_sets = Template((EXAMPLE / "scale_sets.yaml").read_text()).substitute(values)
    (root / "scale_sets.yaml").write_text(_without_aws(scale_sets))
    (root / "rungar.yaml").write_text(yaml.safe_dump({"scale_sets": "scale_sets.yaml"}))
    for name in ("host1", "host2", "host3"):
        (root / name).mkdir()
        toml = Template((EXAMPLE / "runnerd.toml").read_text()).substitute(
            NAME=name, RUN="t", MEMORY_MAX="1G", DIR=str(root), PYTHON=sys.executable
        )
        (root / name / "runnerd.toml").write_text(toml)
    jobs = []
    for i in range(24):
        profile, memory = ("large", 448 * M) if i % 4 == 0 else ("small", 160 * M)
        at = T0 + i * 300
        start = JobStart(
            f"r{i}", f"demo-{profile}", profile, memory, 1.0, "caps", memory, 1.0,
            "its profile's memory", None, None, at, queued_at=at - 5,
        )  # fmt: skip
        end = JobEnd("succeeded", memory // 2, 0.5, False, False, 0, at + 240)
        jobs.append(
            GeneratedJob(start, JobKey(profile, "octo/app", "ci", f"j{i % 3}"), end, str(i))
        )
    write_history(root / "host1" / "history.db", jobs)
    return root


def simulate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rungar.cli.main", "simulate", *args],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.mark.parametrize("given", ["", "rungar.yaml", "scale_sets.yaml"])
def test_the_demo_s_folder_or_the_daemon_s_settings_replay_with_nothing_else(
    tmp_path: Path, given: str
) -> None:
    folder = demo_folder(tmp_path)
    done = simulate(str(folder / given) if given else str(folder), "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["jobs"] == 24
    assert f"found host1: {folder / 'host1' / 'runnerd.toml'}, its history" in done.stderr
    # demo-large and demo-huge both run profile large: its jobs go by the scale set runnerd
    # recorded as asking for their runners.
    assert "profiles to scale sets: small -> demo-small" in done.stderr


def test_a_folder_without_any_history_says_to_give_one(tmp_path: Path) -> None:
    folder = demo_folder(tmp_path)
    (folder / "host1" / "history.db").unlink()
    done = simulate(str(folder))
    assert done.returncode == 2
    assert "no job history found" in done.stderr and "--history FILE" in done.stderr


def test_a_folder_without_a_scale_sets_yaml_is_named(tmp_path: Path) -> None:
    done = simulate(str(tmp_path))
    assert done.returncode == 2 and f"{tmp_path}: no scale_sets.yaml" in done.stderr
