"""``runnerd simulate``'s compiled engine: the same tables as its Python sources, through the CLI.

docs/admission.md, "Try it first: runnerd simulate". The rest of the suite tests the engine's
Python sources (tests/conftest.py); here real ``runnerd`` processes replay a generated history
with the compiled build and without it, on a host that keeps up, one whose CPU budget holds jobs
back at its peaks and one it overloads, and print the same table.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from runnerd.simulate import compiled
from runnerd.simulate.build_engine import build

RUNNERD = [sys.executable, "-m", "runnerd.cli"]


@pytest.fixture(scope="module")
def compiled_engine() -> Iterator[None]:
    """A build matching the sources: ``make test`` makes it first; a test run without it builds
    it here, one worker at a time."""
    lock_path = Path(tempfile.gettempdir()) / "runnerd-simulate-build.lock"
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not compiled.built():
                try:
                    build(quiet=True)
                except RuntimeError as exc:
                    pytest.fail(f"the replay engine does not compile: {exc}")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    yield


def runnerd(args: list[str], cwd: Path, engine: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, compiled.SWITCH: "1" if engine == "compiled" else "0"}
    return subprocess.run(
        [*RUNNERD, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.usefixtures("compiled_engine")
@pytest.mark.parametrize("cpus", ["48", "32", "3"])  # keeps up, holds at its peaks, overloaded
def test_the_compiled_engine_prints_the_table_the_python_sources_print(
    tmp_path: Path, cpus: str
) -> None:
    generate = "history generate --jobs 4000 --days 5 --seed 2 --db history.db"
    made = runnerd([*generate.split(), "--write-config", "runnerd.toml"], tmp_path, "python")
    assert made.returncode == 0, made.stderr
    # Relative paths in the command line: the written config still finds its history.
    factors = ["--cpu-overcommit", "1", "--cpu-overcommit", "1.5"]
    args = ["simulate", "-c", "runnerd.toml", "--since", "6d", "--cpus", cpus, *factors]
    fast = runnerd(args, tmp_path, "compiled")
    slow = runnerd(args, tmp_path, "python")
    assert fast.returncode == 0, fast.stderr
    assert slow.returncode == 0, slow.stderr
    assert "cpu ×1.5" in fast.stdout
    assert fast.stdout == slow.stdout
    assert fast.stderr.strip().endswith("replayed by the compiled engine")
    assert "replayed by the Python engine, as RUNNERD_SIMULATE_COMPILED=0" in slow.stderr


def test_a_build_is_used_only_while_its_stamp_matches_the_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(compiled, "folder", lambda: tmp_path)
    monkeypatch.setenv(compiled.SWITCH, "1")
    source = ["/the/sources"]
    assert compiled.search_path(source) == source  # never built
    (tmp_path / compiled.STAMP).write_text(compiled.stamp())
    assert compiled.search_path(source) == [str(tmp_path), *source]
    # A build of other sources: one digest differs
    lines = compiled.stamp().splitlines(keepends=True)
    lines[1] = ("0" if lines[1][0] != "0" else "1") + lines[1][1:]
    (tmp_path / compiled.STAMP).write_text("".join(lines))
    assert compiled.search_path(source) == source
    (tmp_path / compiled.STAMP).write_text(compiled.stamp())
    monkeypatch.setenv(compiled.SWITCH, "0")
    assert compiled.search_path(source) == source


def test_the_stamp_reads_every_compiled_module_and_what_it_was_compiled_against() -> None:
    names = {f"{p.parent.name}/{p.name}" for p in compiled.sources()}
    assert {f"simulate/{m}.py" for m in compiled.ENGINE} <= names
    assert {"simulate/rows.py", "admission/admit.py", "runnerd/predictor.py"} <= names
    assert "model/job_key.py" in names
    lines = compiled.stamp().splitlines()
    assert lines[0] == f"python {sys.implementation.cache_tag}"
    assert len(lines) == len(names) + 1
