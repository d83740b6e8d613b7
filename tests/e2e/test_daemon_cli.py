"""The daemon as a user drives it: ``rungar serve`` in its own process, two providers over gRPC
(one refusing FULL), and ``rungar status`` asking it. What the engine does with the jobs over
time (the full provider skipped, runners on the other, every machine deleted once its job is
done) is checked on the virtual clock in tests/virtual/test_engine_behaviours.py. ``kill -9``
at random moments and a restart is in test_daemon_kill.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from rungar.model.machine import RefusalKind
from rungar.testing.fake_provider import GIB, FakeProvider
from rungar.testing.github_emulator.model import JobState
from tests.e2e.daemon_world import DaemonWorld


def fleet() -> dict[str, Any]:
    return {
        "version": 1,
        "timing": {
            "reconcile_interval": "5s",
            "backoff_first": "2s",
            "backoff_max": "8s",
            "left_grace": "2s",
        },
        "providers": [
            {"name": "full-host", "type": "runnerd", "runner": {"vcpus": 2, "memory": "1GiB"}},
            {"name": "roomy-host", "type": "runnerd", "runner": {"vcpus": 2, "memory": "1GiB"}},
        ],
        "scale_sets": [
            {
                "name": "linux",
                "labels": ["linux"],
                "max_runners": 8,
                "placement": "pack",
                "start_timeout": "30s",
                "providers": ["full-host", "roomy-host"],
            },
        ],
    }


def providers() -> dict[str, FakeProvider]:
    full = FakeProvider("full-host", vcpus=64, memory_bytes=128 * GIB)
    full.refuse(RefusalKind.FULL, always=True, resource="memory", message="no memory left")
    return {
        "full-host": full,
        "roomy-host": FakeProvider("roomy-host", vcpus=64, memory_bytes=128 * GIB),
    }


async def queue(world: DaemonWorld, n: int, duration: float) -> None:
    """Queue through the emulator's control API: its state belongs to the emulator's thread."""
    for i in range(n):
        await world.queue_job(
            labels=["linux"], name=f"job-{i}", duration=duration, memory_bytes=8 << 20
        )


def jobs_done(world: DaemonWorld) -> bool:
    return all(j.state is JobState.COMPLETED for j in world.emulator.state.jobs.values())


@pytest.fixture
async def world() -> Any:
    # A short path of its own: unix socket paths are limited to 103 characters.
    root = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))
    w = DaemonWorld(root, providers())
    await w.start(fleet())
    yield w
    await w.stop()
    shutil.rmtree(root, ignore_errors=True)


async def test_status_exits_non_zero_only_when_the_daemon_cannot_be_asked(
    world: DaemonWorld,
) -> None:
    assert (await world.rungar("status")).returncode == 0
    world.kill_daemon()
    done = await world.rungar("status")
    assert done.returncode == 1
    assert "cannot reach the rungar daemon" in done.stderr


async def test_completion_asks_the_daemon_for_scale_set_provider_and_runner_names(
    world: DaemonWorld, tmp_path: Path
) -> None:
    """The bash script, sourced in a real bash, runs ``rungar __complete`` against the daemon."""
    await queue(world, 1, duration=600)
    status = await world.wait_for(lambda s: bool(s and s["runners"]), "a runner", 60)
    runner = status["runners"][0]["name"]
    script = tmp_path / "rungar.bash"
    made = subprocess.run(
        [sys.executable, "-m", "rungar.cli.main", "completion", "bash"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    script.write_text(made.stdout)
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "rungar").write_text(f'#!/bin/sh\nexec {sys.executable} -m rungar.cli.main "$@"\n')
    (shim / "rungar").chmod(0o755)

    def complete(line: str) -> list[str]:
        words = line.split(" ")
        quoted = " ".join(shlex.quote(w) for w in words)
        program = (
            f"source {script}; COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; _rungar; "
            'printf "%s\\n" "${COMPREPLY[@]}"'
        )
        env = {**os.environ, "PATH": f"{shim}:{os.environ['PATH']}"}
        done = subprocess.run(
            ["bash", "-c", program], capture_output=True, text=True, env=env, timeout=60
        )
        return sorted(done.stdout.split())

    sock = f"--socket {world.socket}"
    assert await asyncio.to_thread(complete, f"rungar scale-sets pause {sock} ") == ["linux"]
    assert await asyncio.to_thread(complete, f"rungar providers drain {sock} ") == [
        "full-host",
        "roomy-host",
    ]
    assert await asyncio.to_thread(complete, f"rungar runners rm {sock} ") == [runner]
    assert await asyncio.to_thread(complete, f"rungar runners ls {sock} --provider r") == [
        "roomy-host"
    ]


def status_in_a_terminal(socket: str, columns: int) -> str:
    """``rungar status`` run on a pseudo-terminal ``columns`` wide, as a person runs it."""
    import fcntl
    import pty
    import struct
    import termios

    main_fd, child_fd = pty.openpty()
    fcntl.ioctl(child_fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    child = subprocess.Popen(
        [sys.executable, "-m", "rungar.cli.main", "status", "--socket", socket],
        stdin=child_fd, stdout=child_fd, stderr=child_fd, env=env, close_fds=True,
    )  # fmt: skip
    os.close(child_fd)
    chunks = []
    while True:
        try:
            chunk = os.read(main_fd, 4096)
        except OSError:  # the terminal's other end closed: the command is done
            break
        if not chunk:
            break
        chunks.append(chunk)
    child.wait(timeout=60)
    os.close(main_fd)
    return b"".join(chunks).decode().replace("\r\n", "\n")


async def test_status_fits_an_80_column_terminal_and_keeps_every_column_without_one(
    world: DaemonWorld,
) -> None:
    await queue(world, 2, duration=600)
    await world.wait_for(lambda s: bool(s and len(s["runners"]) == 2), "two runners", 60)
    text = await asyncio.to_thread(status_in_a_terminal, world.socket, 80)
    lines = text.splitlines()
    start = lines.index("Runners (2)")
    table = lines[start + 1 : start + 4]
    assert all(len(line) <= 80 for line in table), table
    assert "(left out at 80 columns:" in text
    # No terminal anywhere (and no $COLUMNS, which a library of this process may have set at
    # the C level, out of os.environ's sight): nothing is left out.
    piped = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "rungar.cli.main", "status", "--socket", world.socket],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        env={k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")},
    )  # fmt: skip
    assert piped.returncode == 0 and "left out" not in piped.stdout
    assert "PRIORITY" in piped.stdout and "MACHINE" in piped.stdout


def into_a_closed_pipe(socket: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """``rungar ARGV`` writing into a pipe whose reader is already gone, as ``| head -2`` leaves
    it once head has its lines: every write fails."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "rungar.cli.main", *argv, "--socket", socket],
            stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60,
        )  # fmt: skip
    finally:
        os.close(write_end)


async def test_a_closed_output_ends_every_command_quietly_with_sigpipes_code(
    world: DaemonWorld,
) -> None:
    await queue(world, 1, duration=600)
    await world.wait_for(lambda s: bool(s and s["runners"]), "a runner", 60)
    for argv in (
        ("events",),  # one line at a time
        ("events", "--json"),
        ("status",),  # one write, flushed at the end
        ("scale-sets", "ls"),
        ("runners", "ls"),
        ("usage",),
    ):
        done = await asyncio.to_thread(into_a_closed_pipe, world.socket, *argv)
        assert (done.returncode, done.stderr) == (141, ""), argv


async def test_doctor_without_c_checks_the_rungar_yaml_of_the_daemon_on_rungar_socket(
    world: DaemonWorld,
) -> None:
    env = {**os.environ, "RUNGAR_SOCKET": world.socket}
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "rungar.cli.main", "doctor", "--json"],
        capture_output=True, text=True, timeout=120, env=env, cwd="/",
    )  # fmt: skip
    checks = json.loads(done.stdout)["checks"]
    yaml_path = str(world.root / "rungar.yaml")
    assert checks[0] == {
        "area": "config",
        "level": "ok",
        "message": f"{yaml_path} loads (the rungar.yaml of the daemon on {world.socket})",
        "fix": "",
    }
    sockets = [c for c in checks if c["area"] == "socket"]
    assert [c["level"] for c in sockets] == ["ok"], sockets  # the daemon's socket, found

    # Pointed at another socket than the one of the rungar.yaml it is given: it says so, and
    # each fix that runs a command names the file.
    other = str(world.root / "elsewhere.sock")
    env = {**os.environ, "RUNGAR_SOCKET": other}
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "rungar.cli.main", "doctor", "-c", yaml_path],
        capture_output=True, text=True, timeout=120, env=env, cwd="/",
    )  # fmt: skip
    assert f"rungar's commands here ask {other} (--socket or $RUNGAR_SOCKET)" in done.stdout
    assert f"→ export RUNGAR_SOCKET={world.socket}" in done.stdout
    fixes = [line for line in done.stdout.splitlines() if "→" in line and "rungar " in line]
    assert fixes and all(" -c " in line for line in fixes), fixes


async def test_a_mistyped_name_is_a_usage_error_with_the_closest_name(world: DaemonWorld) -> None:
    for argv, said in (
        (("scale-sets", "inspect", "linx"), "no scale set named linx; did you mean linux?"),
        (
            ("events", "--provider", "roomy-hots"),
            "no provider named roomy-hots; did you mean roomy-host?",
        ),
        (("runners", "ls", "--scale-set", "lnux"), "no scale set named lnux; did you mean linux?"),
    ):
        done = await world.rungar(*argv)
        assert (done.returncode, done.stdout) == (2, ""), argv
        assert done.stderr.startswith(f"rungar: {said}"), done.stderr
    assert (await world.rungar("events", "--provider", "roomy-host")).returncode == 0
