"""``rungar validate FILE``: the valid line, or every problem on stderr with exit 2."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from rungar.cli import validate

ROOT = Path(__file__).resolve().parents[2]
MINIMAL = (
    "providers: [{ name: p, type: fake }]\n"
    "scale_sets: [{ name: a, max_runners: 1, providers: [p] }]\n"
)


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="rungar")
    subparsers = parser.add_subparsers(dest="command")
    validate.add_parser(subparsers, "validate", "check a scale_sets.yaml")
    return validate.run(parser.parse_args(["validate", *argv]))


def test_a_valid_file_prints_its_counts_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    example = str(ROOT / "config" / "scale_sets.example.yaml")
    assert run(example) == 0
    assert capsys.readouterr().out == f"{example} is valid: 3 providers, 3 scale sets\n"


def test_one_provider_and_one_scale_set_are_singular(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(MINIMAL)
    assert run(str(path)) == 0
    assert capsys.readouterr().out == f"{path} is valid: 1 provider, 1 scale set\n"


def test_every_problem_goes_to_stderr_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        "providers: [{ name: p, type: fake, weight: 0 }]\n"
        "scale_sets: [{ name: a, max_runners: 0, providers: [q] }]\n"
    )
    assert run(str(path)) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        f"{path}:1:36: providers[0].weight: must be positive, not 0",
        f"{path}:2:25: scale_sets[0].max_runners: must be at least 1",
        f"{path}:2:53: scale_sets[0].providers[0]: no provider named q",
    ]


def test_json_output_for_a_valid_and_an_invalid_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(MINIMAL)
    assert run("--json", str(good)) == 0
    assert json.loads(capsys.readouterr().out) == {
        "file": str(good),
        "valid": True,
        "providers": 1,
        "scale_sets": 1,
    }
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: no\n")
    assert run("--json", str(bad)) == 2
    result = json.loads(capsys.readouterr().out)
    assert result["valid"] is False
    assert {
        "file": str(bad),
        "line": 1,
        "col": 1,
        "path": "name",
        "message": (
            "unknown key; known keys are version, providers, scale_sets, timing, dashboard, usage, "
            "job_reasons"
        ),
    } in result["problems"]
    assert {
        "file": str(bad),
        "line": 1,
        "col": 1,
        "path": "providers",
        "message": "is required",
    } in result["problems"]


def test_a_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(str(tmp_path / "nope.yaml")) == 2
    assert "cannot be read" in capsys.readouterr().err


def test_a_file_without_a_version_is_valid_with_a_warning_naming_the_migration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(MINIMAL)
    assert run(str(path)) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"Warning: {path} states no version:;")
    assert f"rungar config migrate --write {path}" in err
    path.write_text("version: 1\n" + MINIMAL)
    assert run(str(path)) == 0
    assert capsys.readouterr().err == ""
