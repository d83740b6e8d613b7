"""``rungar fake-runner`` as a real process against the emulator: register, run one job, exit."""

from __future__ import annotations

import asyncio
import os
import resource
import sys

import httpx

from rungar.model.runner_version import RunnerVersion, refused_version
from rungar.testing.github_emulator import GitHubEmulator, JobSpec, JobState
from rungar.testing.github_emulator.harness import fast_options, github, scale_set

MIB = 1024 * 1024


async def _fake_runner(jit: str, *args: str, via_env: bool = True) -> tuple[int, str]:
    """Run the fake runner with ``jit`` in its environment, or on its stdin: never in argv."""
    env = {k: v for k, v in os.environ.items() if k != "ACTIONS_RUNNER_INPUT_JITCONFIG"}
    argv = [sys.executable, "-m", "rungar.cli.fake_runner", "--max-wait", "20", *args]
    if via_env:
        env["ACTIONS_RUNNER_INPUT_JITCONFIG"] = jit
    else:
        argv += ["--jitconfig-stdin"]
    proc = await asyncio.create_subprocess_exec(
        *argv,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(b"" if via_env else jit.encode()), 60)
    return proc.returncode or 0, out.decode()


async def test_the_fake_runner_takes_one_job_runs_its_workload_and_reports_the_result() -> None:
    async with GitHubEmulator(fast_options(clock_factor=10.0)) as emu, github(emu) as gh:
        scale_set_id = await gh.ensure_scale_set(scale_set())
        session = await gh.client.create_session(scale_set_id, "host")
        await gh.client.get_message(session, 0, 5)  # the first poll tells the service our capacity
        job = emu.state.queue_job(
            JobSpec(
                labels=("rungar",), duration=3.0, memory_bytes=96 * MIB, cpu=0.5, result="Failed"
            )
        )
        runner_id, jit = await gh.generate_jit_config(scale_set_id, "linux-1")
        code, out = await _fake_runner(jit)
        assert code == 0, out
        finished = emu.state.jobs[job.job_id]
        assert finished.state is JobState.COMPLETED and finished.result == "Failed"
        assert finished.runner_name == "linux-1"
        assert finished.finished_at - finished.started_at >= 3.0  # compressed 10x: 0.3 s real
        assert runner_id not in emu.state.runners  # ephemeral: gone after its job
        assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 >= 96 * MIB
        assert jit not in out  # the secret is never printed


async def test_a_jit_config_works_once_only() -> None:
    async with GitHubEmulator(fast_options()) as emu, github(emu) as gh:
        scale_set_id = await gh.ensure_scale_set(scale_set())
        _, jit = await gh.generate_jit_config(scale_set_id, "linux-1")
        emu.state.connect(next(iter(emu.state.runners.values())))  # someone used it already
        code, out = await _fake_runner(jit, via_env=False)
    assert code == 1
    assert "registration refused (HTTP 409)" in out


async def test_the_fake_runner_refuses_to_start_without_a_jit_config() -> None:
    code, out = await _fake_runner("", via_env=False)
    assert code == 2
    code, out = await _fake_runner("bm90IGEgaml0IGNvbmZpZw==", via_env=False)
    assert code == 2 and "not a JIT config" in out


async def test_a_runner_below_githubs_minimum_is_refused_at_connect_and_exits_outdated() -> None:
    async with GitHubEmulator(fast_options()) as emu, github(emu) as gh:
        scale_set_id = await gh.ensure_scale_set(scale_set())
        runner_id, jit = await gh.generate_jit_config(scale_set_id, "linux-1")
        code, out = await _fake_runner(jit, "--runner-version", "2.320.0")
        assert code == 7, out
        assert (
            "An error occurred: Runner version v2.320.0 is deprecated and cannot receive messages."
            in out
        )
        assert not emu.state.runners[runner_id].online
        assert refused_version(out.splitlines()) == RunnerVersion(2, 320, 0)


async def test_moving_the_minimum_during_a_run_refuses_a_runner_taken_before() -> None:
    async with GitHubEmulator(fast_options()) as emu, github(emu) as gh:
        scale_set_id = await gh.ensure_scale_set(scale_set())
        _, first = await gh.generate_jit_config(scale_set_id, "linux-1")
        _, second = await gh.generate_jit_config(scale_set_id, "linux-2")
        version = ("--runner-version", "2.330.0")
        code, out = await _fake_runner(first, "--max-wait", "0.1", *version)
        assert code == 1 and "online" in out, "taken at 2.329.0: no job came, so it gave up"
        async with httpx.AsyncClient() as http:
            moved = await http.post(
                f"{emu.base_url}/_fake/runner-minimum", json={"minimum": "2.331.0"}
            )
        assert moved.status_code == 204
        code, out = await _fake_runner(second, *version)
        assert code == 7 and "v2.330.0 is deprecated" in out, out
