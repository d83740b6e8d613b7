"""Real workloads under the process runtime: refused FULL for memory, admitted once one ends.

The runners are real ``python -c`` processes. Where the machine has a writable memory cgroup
(not on cgroup v1) they run under a real cap and the kernel kills one past it;
elsewhere runnerd samples /proc and kills it itself. Either way the history says it met its cap.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from runnerd.config import parse_config
from runnerd.daemon import open_daemon
from runnerd.running import Daemon

from rungar.clock import SystemClock
from rungar.model.machine import (
    Conclusion,
    Created,
    CreateRequest,
    JobHint,
    MachineState,
    Refusal,
    RefusalKind,
    Removal,
)
from rungar.model.runner import RemovalReason
from rungar.model.runner_block import RunnerBlock
from tests.waiting import until, until_awaited

# Holds 40M, then waits for its release file; exits 0. Never sees the JIT config on stdout.
HOLD = (
    "import os, sys, time\n"
    "block = bytearray(40 * 1024 * 1024)\n"
    "assert os.environ['RUNGAR_JITCONFIG'] == os.environ['ACTIONS_RUNNER_INPUT_JITCONFIG']\n"
    "release = os.environ['RELEASE_DIR'] + '/' + os.environ['RUNGAR_RUNNER_NAME']\n"
    "while not os.path.exists(release):\n"
    "    time.sleep(0.02)\n"
)
# A runner that cannot start: says why on stderr and exits before it ever connects.
BROKEN = (
    "import sys\n"
    "for i in range(30):\n"
    "    print(f'line {i}')\n"
    "print('Error: the runner config is not valid', file=sys.stderr)\n"
    "sys.exit(3)\n"
)
# Grows past any cap of a few hundred MiB, then idles so /proc sampling can see it.
GREEDY = "import time\nblocks = [bytearray(32 * 1024 * 1024) for _ in range(12)]\ntime.sleep(30)\n"


def config_text(state_dir: Path, release: Path) -> str:
    slice_name = f"rdtest{uuid.uuid4().hex[:8]}.slice"
    return f"""
[host]
slice = "{slice_name}"
memory_max = "700M"
admission = "measured"
runtime = "process"
state_dir = "{state_dir}"
cpus = 2

[profiles.work]
command = [{json.dumps(sys.executable)}, "-c", {json.dumps(HOLD)}]
cpus = 1
memory = "300M"
slots = 5
env = {{ RELEASE_DIR = "{release}" }}

[profiles.broken]
command = [{json.dumps(sys.executable)}, "-c", {json.dumps(BROKEN)}]
cpus = 1
memory = "64M"
slots = 1

[profiles.greedy]
command = [{json.dumps(sys.executable)}, "-c", {json.dumps(GREEDY)}]
cpus = 1
memory = "128M"
slots = 1
"""


@pytest.fixture
async def daemon(tmp_path: Path) -> AsyncIterator[tuple[Daemon, Path]]:
    release = tmp_path / "release"
    release.mkdir()
    text = config_text(tmp_path / "state", release)
    config = parse_config(text)
    d = await open_daemon(config, SystemClock(), config_text=text)
    yield d, release
    for name in list(d.provider.runners):
        (release / name).touch()
        await d.provider.delete(name)
    await d.close()  # stops the runners and removes the slice cgroup it made


def request(name: str, profile: str = "work") -> CreateRequest:
    return CreateRequest(
        runner_name=name,
        request_id=f"req-{name}",
        scale_set="work",
        labels={"rungar.sh/managed": "true", "rungar.sh/runner": name},
        runner=RunnerBlock(extra={"profile": profile}),
        jit_config="secret-jit-config",
        job_hints=(JobHint("octo/app", "ci", "build", "42"),),
    )


async def wait_until_stopped(d: Daemon, name: str) -> None:
    async def stopped() -> bool:
        await d.sampler.tick()
        return d.provider.runners[name].state is MachineState.STOPPED

    await until_awaited(stopped, f"stopped {name}")


async def wait_for_peak(d: Daemon, name: str, least: int) -> None:
    async def peaked() -> bool:
        await d.sampler.tick()
        return d.provider.runners[name].peak >= least

    await until_awaited(peaked, f"saw {name} peak at {least} bytes or more")


async def test_runnerd_refuses_full_for_memory_then_admits_once_a_runner_finishes(
    daemon: tuple[Daemon, Path],
) -> None:
    d, release = daemon
    provider = d.provider
    first = await provider.create(request("r1"))
    second = await provider.create(request("r2"))
    assert isinstance(first, Created) and isinstance(second, Created)
    await wait_for_peak(d, "r2", 40 * 1024**2)
    refused = await provider.create(request("r3"))
    assert isinstance(refused, Refusal)
    assert (refused.kind, refused.resource) == (RefusalKind.FULL, "memory")
    assert refused.message == (
        "The slice is short of memory: needs 300M; 100M of its 700M MemoryMax is free"
    )
    # A repeat of an admitted create returns the same runner.
    again = await provider.create(request("r1"))
    assert isinstance(again, Created) and again.machine.name == "r1"

    await wait_for_peak(d, "r1", 40 * 1024**2)
    (release / "r1").touch()
    await wait_until_stopped(d, "r1")
    admitted = await provider.create(request("r3"))
    assert isinstance(admitted, Created)
    await provider.delete("r1", Removal(RemovalReason.JOB_COMPLETED, Conclusion.SUCCEEDED))
    row = d.history.job("1")
    assert row is not None and row["result"] == "succeeded" and row["runner"] == "r1"
    assert row["peak_memory"] >= 40 * 1024**2  # its 40M block, sampled while it ran
    assert "secret-jit-config" not in Path(d.config.host.history_path()).read_bytes().decode(
        "latin-1"
    )


async def test_a_runner_over_its_memory_cap_is_killed_and_recorded_as_having_met_it(
    daemon: tuple[Daemon, Path],
) -> None:
    d, _ = daemon
    created = await d.provider.create(request("hog", profile="greedy"))
    assert isinstance(created, Created)
    await wait_until_stopped(d, "hog")
    row = d.history.job("1")  # kept with what it showed until Rungar says how its job ended
    assert row is not None
    assert (row["result"], row["met_cap"], row["exit_code"]) == (None, 1, -9)


async def test_without_a_memory_cgroup_runnerd_kills_a_runner_over_its_cap_itself(
    tmp_path: Path,
) -> None:
    from runnerd.runtime.process import ProcessRuntime

    text = config_text(tmp_path / "state", tmp_path)
    config = parse_config(text)
    runtime = ProcessRuntime(config.host.slice, config.host.state_dir, use_cgroups=False)
    assert runtime.mode == "proc"
    d = await open_daemon(config, SystemClock(), runtime=runtime, config_text=text)
    try:
        created = await d.provider.create(request("hog", profile="greedy"))
        assert isinstance(created, Created)
        await wait_until_stopped(d, "hog")
        row = d.history.job("1")
        assert row is not None
        assert (row["result"], row["met_cap"]) == (None, 1)
        assert row["peak_memory"] > 128 * 1024**2
    finally:
        await d.provider.delete("hog")
        await d.close()


# Takes the first SIGTERM as a shell that has not started its command yet would; the second
# ends it cleanly, and says so.
DEAF_ONCE = (
    "import os, pathlib, signal, sys, time\n"
    "out = pathlib.Path(os.environ['RELEASE_DIR'])\n"
    "terms = []\n"
    "def term(*_):\n"
    "    terms.append(1)\n"
    "    if len(terms) > 1:\n"
    "        (out / 'second-term').touch()\n"
    "        sys.exit(0)\n"
    "signal.signal(signal.SIGTERM, term)\n"
    "(out / 'ready').touch()\n"
    "time.sleep(60)\n"
)


async def test_a_stop_repeats_sigterm_so_a_runner_that_missed_the_first_ends_cleanly(
    tmp_path: Path,
) -> None:
    from runnerd.runtime.base import RunnerSpec
    from runnerd.runtime.process import ProcessRuntime

    runtime = ProcessRuntime(
        f"rdterm{uuid.uuid4().hex[:8]}.slice", str(tmp_path), use_cgroups=False
    )
    spec = RunnerSpec(
        name="deaf",
        profile="work",
        scale_set="work",
        image="",
        command=(sys.executable, "-c", DEAF_ONCE),
        cpus=1,
        memory=256 * 1024**2,
        labels={},
        env={"RELEASE_DIR": str(tmp_path)},
    )
    handle = await runtime.start(spec)
    await until((tmp_path / "ready").exists, "made its SIGTERM handler ready")
    await runtime.stop(handle)
    assert (tmp_path / "second-term").exists(), "it was killed, not stopped"
    await runtime.close()


async def test_a_runner_that_exits_at_once_leaves_its_last_lines_of_output(
    daemon: tuple[Daemon, Path],
) -> None:
    d, _ = daemon
    created = await d.provider.create(request("broken1", profile="broken"))
    assert isinstance(created, Created)
    await wait_until_stopped(d, "broken1")
    lines = list(await d.provider.last_output("broken1", 3))
    assert lines == ["line 28", "line 29", "Error: the runner config is not valid"]
    await d.provider.delete("broken1", Removal(RemovalReason.NEVER_CONNECTED))
    assert list(await d.provider.last_output("broken1", 1)) == [
        "Error: the runner config is not valid"
    ], "still there after its machine is deleted: Rungar asks before, but may ask late"
    assert list(await d.provider.last_output("never-created", 5)) == []


async def test_the_process_runtime_reads_memory_kills_and_throttled_sockets_from_memory_events(
    tmp_path: Path,
) -> None:
    """As the docker runtime does: a fixture cgroup v2 tree stands in for the runner's."""
    from runnerd.runtime.base import RunnerSpec
    from runnerd.runtime.process import ProcessRuntime

    runtime = ProcessRuntime(f"rdev{uuid.uuid4().hex[:8]}.slice", str(tmp_path), use_cgroups=False)
    release = tmp_path / "release"
    release.mkdir()
    spec = RunnerSpec(
        name="evented", profile="work", scale_set="work", image="",
        command=(sys.executable, "-c", HOLD), cpus=1, memory=256 * 1024**2, labels={},
        env={"RELEASE_DIR": str(release), "RUNGAR_JITCONFIG": "j",
             "ACTIONS_RUNNER_INPUT_JITCONFIG": "j", "RUNGAR_RUNNER_NAME": "evented"},
    )  # fmt: skip
    handle = await runtime.start(spec)
    cgroup = tmp_path / "cgroup"
    cgroup.mkdir()
    (cgroup / "memory.current").write_text(str(100 * 1024**2))
    (cgroup / "memory.stat").write_text("anon 90000000\nactive_file 0\ninactive_file 0\n")
    (cgroup / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 0\noom_kill 1\n")
    (cgroup / "memory.events.local").write_text("low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n")
    runtime.mode = "v2"
    runtime._children[handle].cgroup = cgroup  # the fixture tree, as a cgroup v2 host has it
    try:
        usage = await runtime.sample(handle)
        assert usage is not None
        assert (usage.killed_for_memory, usage.met_cap, usage.sock_throttled) == (True, False, None)
        (cgroup / "memory.events").write_text("max 3\noom 0\noom_kill 1\nsock_throttled 7\n")
        (cgroup / "memory.events.local").write_text("max 3\noom 1\noom_kill 1\n")
        usage = await runtime.sample(handle)
        assert usage is not None
        # Its own limit ran out: it met its cap, which is not a kill from above.
        assert (usage.met_cap, usage.killed_for_memory, usage.sock_throttled) == (True, False, 7)
    finally:
        (release / "evented").touch()
        runtime.mode = "proc"
        runtime._children[handle].cgroup = None
        await runtime.stop(handle)
        await runtime.close()
