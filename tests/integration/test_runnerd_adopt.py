"""The process runtime adopts the runners a crashed runnerd left running.

A runnerd that crashes is played by a real process: it starts a runner through its own
:class:`ProcessRuntime`, prints the runner's pid and is killed with SIGKILL, so nothing of it
survives but what it wrote to its state directory and the runner, now nobody's child. A new
runtime on the same state directory then adopts it. Each test runs under this machine's memory
cgroup where one is writable (not on cgroup v1) and with /proc sampling alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import structlog
from runnerd.runtime.base import Usage
from runnerd.runtime.process import ProcessRuntime

from tests.waiting import until, until_awaited

SECRET = "jit-secret-never-stored"
DYING_RUNNERD = """
import asyncio, json, sys
from runnerd.runtime.base import RunnerSpec
from runnerd.runtime.base import Usage
from runnerd.runtime.process import ProcessRuntime

from tests.waiting import until, until_awaited

async def main():
    given = json.loads(sys.argv[1])
    runtime = ProcessRuntime(given["slice"], given["state_dir"], use_cgroups=given["cgroups"])
    spec = RunnerSpec(
        name="r1", profile="work", scale_set="octo", image="", command=tuple(given["command"]),
        cpus=1.5, memory=256 * 1024**2, labels={"runnerd.profile": "work", "team": "web"},
        env={"RUNGAR_JITCONFIG": given["secret"]},
    )
    await runtime.start(spec)
    print(runtime.pid("r1"), flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""
# Burns CPU until its own CPU time is measurable (a busy machine may give the interpreter's start
# too little of a CPU to show), then holds 20M so a sample can tell the runner itself is read,
# then waits to be stopped.
HOLD = (
    "import time\n"
    "while time.process_time() < 0.05:\n    pass\n"
    "block = bytearray(20 * 1024 * 1024)\n"
    "time.sleep(60)\n"
)


@dataclass
class Host:
    state_dir: Path
    slice: str
    cgroups: bool

    def runtime(self) -> ProcessRuntime:
        return ProcessRuntime(self.slice, str(self.state_dir), use_cgroups=self.cgroups)

    def record(self) -> Path:
        return self.state_dir / "runners" / "r1.json"


@pytest.fixture(params=[True, False], ids=["cgroup", "proc"])
async def host(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Host]:
    found = Host(tmp_path / "state", f"rdadopt{uuid.uuid4().hex[:8]}.slice", request.param)
    yield found
    cleanup = found.runtime()  # stops what a test left running, removes the slice's cgroup
    await cleanup.adopt()
    await cleanup.close()


def crash_after_starting(host: Host, command: list[str]) -> int:
    """Start r1 in a runnerd that is then killed with SIGKILL; the runner's pid."""
    given = {
        "slice": host.slice,
        "state_dir": str(host.state_dir),
        "cgroups": host.cgroups,
        "command": command,
        "secret": SECRET,
    }
    runnerd = subprocess.Popen(
        [sys.executable, "-c", DYING_RUNNERD, json.dumps(given)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert runnerd.stdout is not None
        pid = int(runnerd.stdout.readline())
    finally:
        runnerd.kill()
        runnerd.wait()
    return pid


def running(pid: int) -> bool:
    """Whether ``pid`` runs: this machine's init leaves orphans as zombies."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return text.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


async def sampled_until(runtime: ProcessRuntime, done: Callable[[Usage], bool], what: str) -> Usage:
    """Sample r1 until ``done`` holds for its usage."""

    async def sample() -> Usage | None:
        usage = await runtime.sample("r1")
        return usage if usage is not None and done(usage) else None

    found = await until_awaited(sample, what)
    assert found is not None
    return found


async def test_a_runner_left_by_a_crashed_runnerd_is_adopted_sampled_and_stopped(
    host: Host,
) -> None:
    pid = crash_after_starting(host, [sys.executable, "-c", HOLD])
    assert running(pid)
    runtime = host.runtime()

    adopted = await runtime.adopt()

    assert [(a.name, a.handle, a.cpus, a.memory) for a in adopted] == [
        ("r1", "r1", 1.5, 256 * 1024**2)
    ]
    assert adopted[0].labels == {"runnerd.profile": "work", "team": "web"}
    assert runtime.pid("r1") == pid
    usage = await sampled_until(
        runtime, lambda u: u.exited or (u.memory >= 20 * 1024**2), "held its 20M block"
    )
    assert not usage.exited
    assert usage.memory >= 20 * 1024**2  # the runner's 20M block, read from its cgroup or /proc
    assert usage.cpu_seconds > 0  # the interpreter's start, counted for the command itself
    slice_usage = await runtime.slice_usage()
    assert slice_usage is not None and slice_usage.memory >= 20 * 1024**2

    await runtime.stop("r1")

    assert not running(pid)
    assert not host.record().exists()
    assert await runtime.sample("r1") is None
    if runtime.parent is not None:
        assert not (runtime.parent / "r1").exists()


async def test_a_runners_record_holds_what_adoption_needs_and_never_its_environment(
    host: Host,
) -> None:
    pid = crash_after_starting(host, ["sleep", "60"])
    record = host.record()

    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    assert SECRET not in record.read_text()
    data = json.loads(record.read_text())
    assert sorted(data) == [
        "cgroup", "command", "cpus", "labels", "memory", "name", "pid", "profile",
        "scale_set", "start_ticks", "started_at",
    ]  # fmt: skip
    assert (data["pid"], data["command"], data["scale_set"]) == (pid, ["sleep", "60"], "octo")
    assert (data["cgroup"] is not None) == (host.runtime().parent is not None)
    assert list(record.parent.glob("*.tmp")) == []


async def test_a_runner_that_ended_while_no_runnerd_watched_is_not_adopted_and_its_record_goes(
    host: Host,
) -> None:
    pid = crash_after_starting(host, ["/bin/sh", "-c", "sleep 1; exit 3"])
    await until(lambda: not running(pid), "ended")
    runtime = host.runtime()

    with structlog.testing.capture_logs() as logs:
        adopted = await runtime.adopt()

    assert adopted == []
    assert {
        "event": "runner.ended_unwatched",
        "runner": "r1",
        "exit_code": 3,
        "log_level": "info",
    } in logs
    assert sorted(p.name for p in host.record().parent.iterdir()) == ["r1.log"]
    if runtime.parent is not None:
        assert not (runtime.parent / "r1").exists()


async def test_an_adopted_runner_that_ends_on_its_own_reports_its_exit_code(host: Host) -> None:
    pid = crash_after_starting(host, ["/bin/sh", "-c", "sleep 1; exit 5"])
    runtime = host.runtime()
    assert [a.name for a in await runtime.adopt()] == ["r1"]

    usage = await sampled_until(runtime, lambda u: u.exited, "exited")

    assert (usage.exited, usage.exit_code) == (True, 5)
    assert not running(pid)
    assert not host.record().exists()
    await runtime.stop("r1")


async def test_a_record_whose_pid_names_another_process_is_not_adopted_nor_signalled(
    host: Host,
) -> None:
    pid = crash_after_starting(host, ["sleep", "60"])
    record = host.record()
    data = json.loads(record.read_text())
    data["start_ticks"] += 1  # the pid now names a process that started at another time
    record.write_text(json.dumps(data))
    try:
        adopted = await host.runtime().adopt()

        assert adopted == []
        assert not record.exists()
        await asyncio.sleep(0.2)
        assert running(pid)  # not ours to stop
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)


async def test_a_corrupt_record_is_logged_and_skipped(host: Host) -> None:
    pid = crash_after_starting(host, ["sleep", "60"])
    (host.state_dir / "runners" / "r0.json").write_text('{"name": "r0", "pid": ')
    (host.state_dir / "runners" / "r2.json").write_text('{"name": "r2", "pid": -4}')
    runtime = host.runtime()

    with structlog.testing.capture_logs() as logs:
        adopted = await runtime.adopt()

    assert [a.name for a in adopted] == ["r1"]
    unreadable = [e["path"] for e in logs if e["event"] == "runner.record_unreadable"]
    assert [Path(p).name for p in unreadable] == ["r0.json", "r2.json"]
    await runtime.stop("r1")
    assert not running(pid)


async def test_stop_waits_for_the_runner_itself_not_only_its_shell(host: Host) -> None:
    # A runner that takes a moment to wind down on SIGTERM, then exits 7.
    graceful = (
        "import os, signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *_: (time.sleep(0.5), sys.exit(7)))\n"
        "open(sys.argv[1], 'w').write(str(os.getpid()))\n"
        "time.sleep(60)\n"
    )
    pid_file = host.state_dir.parent / "runner.pid"
    runtime = host.runtime()
    from runnerd.runtime.base import RunnerSpec

    spec = RunnerSpec(
        "r1", "work", "octo", "", (sys.executable, "-c", graceful, str(pid_file)),
        1.0, 256 * 1024**2, {}, {},
    )  # fmt: skip
    await runtime.start(spec)
    await until(lambda: pid_file.exists() and pid_file.read_text(), "wrote its pid")
    runner = int(pid_file.read_text())

    await runtime.stop("r1")

    assert not running(runner)
    assert not host.record().exists()


async def test_a_started_runner_reports_its_own_exit_code(host: Host) -> None:
    from runnerd.runtime.base import RunnerSpec

    runtime = host.runtime()
    spec = RunnerSpec("r1", "work", "octo", "", ("sh", "-c", "exit 4"), 1.0, 2**28, {}, {})
    await runtime.start(spec)
    usage = await sampled_until(runtime, lambda u: u.exited, "exited")
    assert usage.exit_code == 4
    assert not host.record().exists()
    await runtime.stop("r1")
