"""``runnerd simulate`` as a command: which rows it prints for a config."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from runnerd.cli import main as runnerd_main
from runnerd.history_generate import example_config, generate, write_history

DAY = 86400.0
NOW = time.time()  # simulate reads the window back from now


def config_with_history(tmp_path: Path, extra_host: str) -> Path:
    db = tmp_path / "history.db"
    write_history(db, generate(120, 2.0, seed=3, until=NOW))
    text = example_config(str(db), 120, 2.0).replace("[host]\n", f"[host]\n{extra_host}\n")
    path = tmp_path / "runnerd.toml"
    path.write_text(text)
    return path


def rows(output: str) -> list[str]:
    table = output.split("POLICY")[1].split("\n\n")[0]
    return [line.split("  ")[0] for line in table.splitlines()[1:]]


def test_simulate_prints_the_cpu_row_whenever_the_config_sets_cpu_overcommit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config_with_history(tmp_path, 'admission = "measured"\ncpu_overcommit = 1.0')
    assert runnerd_main(["simulate", "-c", str(path), "--since", "3d"]) == 0
    assert rows(capsys.readouterr().out)[-1] == "cpu ×1"


def test_simulate_adds_each_asked_factor_after_the_configs_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config_with_history(tmp_path, "cpu_overcommit = 1.0")
    args = ["--cpu-overcommit", "1", "--cpu-overcommit", "1.5"]
    assert runnerd_main(["simulate", "-c", str(path), "--since", "3d", *args]) == 0
    assert rows(capsys.readouterr().out)[-2:] == ["cpu ×1", "cpu ×1.5"]


def test_simulate_prints_no_cpu_row_without_cpu_overcommit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config_with_history(tmp_path, "")
    assert runnerd_main(["simulate", "-c", str(path), "--since", "3d"]) == 0
    assert not any(r.startswith("cpu") for r in rows(capsys.readouterr().out))
