"""make test sets up the browser its tests need, or stops before anything runs with the command.

tools/ensure_chromium.py runs first in ``make test``: the browser found goes on; a missing one is
installed (as root, with apt-get) or stops make at once with the one command to run. The make
tests run the real Makefile with a ``PATH`` that has no Chromium (and, where said, no apt-get) and
with ``MAKE`` replaced by a recorder, so what make test would run next is seen, not run.
tools/busy_test.py's loops are checked to be gone after a failing run and after SIGTERM.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
WAIT = 120.0


def _tool(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


ensure_chromium = _tool("ensure_chromium")


def executable(path: Path, body: str) -> Path:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def bare_environ(bin_dir: Path) -> dict[str, str]:
    """This environment with only ``bin_dir`` on PATH and no Chromium named."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RUNGAR_CHROMIUM", "MAKE"))}
    env["PATH"] = str(bin_dir)
    return env


def make_test(tmp_path: Path, bin_dir: Path) -> tuple[subprocess.CompletedProcess[str], str]:
    """``make test`` in this checkout, its sub-makes recorded rather than run."""
    ran = tmp_path / "sub-makes"
    recorder = executable(tmp_path / "recorder", f'echo "$*" >> {ran}')
    done = subprocess.run(
        [
            "/usr/bin/make",
            "--no-print-directory",
            "-C",
            str(ROOT),
            "test",
            f"PYTHON={sys.executable}",
            f"MAKE={recorder}",
        ],
        env=bare_environ(bin_dir),
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=False,
    )
    return done, ran.read_text() if ran.exists() else ""


@pytest.mark.skipif(not Path("/usr/bin/make").exists(), reason="make is not installed")
def test_make_test_without_chromium_or_the_right_to_install_it_stops_first_with_the_command(
    tmp_path: Path,
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()

    done, ran = make_test(tmp_path, bin_dir)

    assert done.returncode != 0
    assert "no Chromium found" in done.stderr
    assert "install Chromium with your system's package manager" in done.stderr
    assert ran == ""  # neither lint nor the tests started


@pytest.mark.skipif(not Path("/usr/bin/make").exists(), reason="make is not installed")
def test_make_test_with_chromium_goes_on_to_lint_then_types_and_tests(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    executable(bin_dir / "chromium", "exit 0")

    done, ran = make_test(tmp_path, bin_dir)

    assert done.returncode == 0, done.stderr
    assert "Chromium" not in done.stderr
    assert ran.splitlines() == [
        "--no-print-directory lint proto-check",
        "--no-print-directory -j2 types unit",
    ]


def test_a_root_user_with_apt_get_gets_debians_chromium_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "apt-calls"
    # A stand-in apt-get: records its arguments; "install ... chromium" puts a chromium on PATH.
    executable(
        bin_dir / "apt-get",
        f'echo "$DEBIAN_FRONTEND $*" >> {calls}\n'
        f'case "$*" in *install*chromium*) printf "#!/bin/sh\\n" > {bin_dir}/chromium; '
        f"/bin/chmod 755 {bin_dir}/chromium;; esac",
    )
    monkeypatch.setattr(ensure_chromium.os, "geteuid", lambda: 0)

    assert ensure_chromium.main(bare_environ(bin_dir)) == 0

    assert calls.read_text().splitlines() == [
        "noninteractive update -qq",
        "noninteractive install -y -qq --no-install-recommends chromium",
    ]
    assert ensure_chromium.find_chromium(bare_environ(bin_dir)) == str(bin_dir / "chromium")


def test_a_user_who_may_not_install_is_told_the_sudo_command_and_nothing_is_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "apt-calls"
    executable(bin_dir / "apt-get", f'echo "$*" >> {calls}')
    monkeypatch.setattr(ensure_chromium.os, "geteuid", lambda: 1000)

    assert ensure_chromium.main(bare_environ(bin_dir)) == 2

    assert "sudo apt-get install -y --no-install-recommends chromium" in capsys.readouterr().err
    assert not calls.exists()


def test_the_browser_is_looked_up_as_rungar_chromium_first_then_the_names_given(
    tmp_path: Path,
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("chromium", "chromium-browser", "my-chrome"):
        executable(bin_dir / name, "exit 0")
    env = bare_environ(bin_dir)

    assert ensure_chromium.find_chromium(env) == str(bin_dir / "chromium")
    assert ensure_chromium.find_chromium(env | {"RUNGAR_CHROMIUM": "my-chrome"}) == str(
        bin_dir / "my-chrome"
    )
    assert ensure_chromium.find_chromium(env | {"RUNGAR_CHROMIUM_NAMES": "nothing here"}) is None


def busy_loop_pids() -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if b"while True:\n    pass" in cmdline:
                found.add(int(entry.name))
    return found


def test_the_busy_test_stops_at_the_first_failing_run_and_kills_its_loops(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    before = busy_loop_pids()
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "busy_test.py"),
            "--runs",
            "3",
            "--",
            "/bin/sh",
            "-c",
            f"echo run >> {runs}; exit 3",
        ],
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=False,
    )

    assert done.returncode == 3
    assert runs.read_text().splitlines() == ["run"]
    assert "run 1 of 3: exit 3" in done.stdout
    assert busy_loop_pids() <= before


def test_the_busy_tests_loops_go_when_it_is_sent_sigterm() -> None:
    before = busy_loop_pids()
    busy = subprocess.Popen(
        [sys.executable, str(ROOT / "tools" / "busy_test.py"), "--", "sleep", "600"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert busy.stdout is not None
        assert "busy loops" in busy.stdout.readline()
        loops = busy_loop_pids() - before
        assert len(loops) == 2
        busy.send_signal(signal.SIGTERM)
        assert busy.wait(WAIT) == 128 + signal.SIGTERM
    finally:
        busy.kill()
        busy.wait()
    assert not loops & busy_loop_pids()
