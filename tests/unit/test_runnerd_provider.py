"""RunnerdProvider on a fake runtime and a fake clock: profiles, refusals, jobs, waits, history."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Literal

import pytest
from runnerd.admission.model import SUCCESS, HostReading, Run, SliceReading
from runnerd.config import parse_config
from runnerd.history import History, JobEnd, JobKey, JobStart
from runnerd.provider import RunnerdProvider
from runnerd.runtime.base import Adopted, RunnerSpec, SliceUsage, Usage
from runnerd.sampler import Sampler

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
from rungar.testing.clock import FakeClock

G = 1024**3


class FakeRuntime:
    kind = "fake"

    def __init__(self) -> None:
        self.started: dict[str, RunnerSpec] = {}
        self.usage: dict[str, Usage] = {}
        self.stopped: list[str] = []

    async def start(self, spec: RunnerSpec) -> str:
        self.started[spec.name] = spec
        self.usage[spec.name] = Usage(memory=0, held=0, cpu_seconds=0.0)
        return spec.name

    async def sample(self, handle: str) -> Usage | None:
        return self.usage.get(handle)

    async def stop(self, handle: str) -> None:
        self.stopped.append(handle)
        self.usage.pop(handle, None)

    async def slice_usage(self) -> SliceUsage | None:
        total = sum(u.memory for u in self.usage.values())
        return SliceUsage(total, total)

    async def adopt(self) -> list[Adopted]:
        return []

    async def last_output(self, handle: str, lines: int) -> list[str]:
        return []

    def describe(self) -> str:
        return "fake runtime"


CONFIG = """
[host]
memory_max = "33G"
admission = "measured"
cpu_overcommit = 1.0
cpus = 32

[sizing]
margin = "1G"
min_jobs = 10

[profiles.node]
command = ["true"]
cpus = 8
memory = "7G"
slots = 8

[profiles.jvm]
command = ["true"]
cpus = 8
memory = "14G"
slots = 2
"""


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[tuple[RunnerdProvider, FakeRuntime, FakeClock]]:
    clock = FakeClock()
    runtime = FakeRuntime()
    history = History(tmp_path / "history.db")
    config = parse_config(CONFIG.replace("[host]", f'[host]\nstate_dir = "{tmp_path}"'))
    provider = RunnerdProvider(config, runtime, history, clock, 33 * G, 32.0, host_memory=64 * G)
    now = clock.now()
    provider.readings.slice = SliceReading(now, 0)
    provider.readings.host = HostReading(now, 64 * G, 60 * G, 0.0, 0)
    yield provider, runtime, clock
    history.close()


def request(
    name: str, scale_set: str = "node", hints: tuple[JobHint, ...] = (), **block: object
) -> CreateRequest:
    return CreateRequest(
        runner_name=name,
        request_id=f"q-{name}",
        scale_set=scale_set,
        labels={"rungar.sh/managed": "true", "rungar.sh/runner": name},
        runner=RunnerBlock.from_mapping(block),
        jit_config="jit-secret",
        job_hints=hints,
    )


def seed_history(history: History, now: float, key: JobKey, peaks_g: list[float]) -> None:
    rows = []
    for i, peak in enumerate(peaks_g):
        start = JobStart(
            "old",
            "node",
            key.profile,
            7 * G,
            8.0,
            "caps",
            7 * G,
            8.0,
            "",
            None,
            None,
            now - 3600 - i,
        )
        end = JobEnd(SUCCESS, int(peak * G), 0.5, False, False, None, now - 3000 - i)
        rows.append((start, key, end))
    history.insert_finished(rows)


async def test_a_create_names_its_profile_or_uses_the_one_named_after_its_scale_set(
    setup: tuple[RunnerdProvider, FakeRuntime, FakeClock],
) -> None:
    provider, runtime, _ = setup
    assert isinstance(await provider.create(request("a", scale_set="x", profile="jvm")), Created)
    assert isinstance(await provider.create(request("b", vcpus=8, memory="7G")), Created)
    assert runtime.started["a"].memory == 14 * G and runtime.started["b"].profile == "node"
    env = runtime.started["a"].env
    assert env["ACTIONS_RUNNER_INPUT_JITCONFIG"] == env["RUNGAR_JITCONFIG"] == "jit-secret"


async def test_an_unknown_profile_or_a_runner_larger_than_the_host_is_invalid(
    setup: tuple[RunnerdProvider, FakeRuntime, FakeClock],
) -> None:
    provider, _, _ = setup
    unknown = await provider.create(request("a", scale_set="gpu"))
    assert isinstance(unknown, Refusal) and unknown.kind is RefusalKind.INVALID
    assert unknown.message == "No profile named gpu in runnerd.toml; it has jvm, node"
    huge = await provider.create(request("b", memory="40G"))
    assert isinstance(huge, Refusal) and huge.kind is RefusalKind.INVALID
    assert await provider.validate_runner({"profile": "gpu"}) == [unknown.message]
    assert await provider.validate_runner({"profile": "node", "memory": "8G"}) == []
    # A key runnerd does not know is refused, not dropped, with the key it resembles.
    assert await provider.validate_runner({"profile": "node", "memroy": "200M"}) == [
        "memroy: not a runner key runnerd knows; did you mean memory?"
    ]
    info = await provider.info()
    assert set(info.capabilities) == {"vcpus", "memory", "disk", "image", "profile"}


async def test_a_create_is_idempotent_by_name_and_request_id(
    setup: tuple[RunnerdProvider, FakeRuntime, FakeClock],
) -> None:
    provider, runtime, _ = setup
    first = await provider.create(request("a"))
    again = await provider.create(request("a"))
    assert isinstance(first, Created) and isinstance(again, Created)
    assert first.machine == again.machine and len(runtime.started) == 1
    other = CreateRequest("a", "another", "node", {}, RunnerBlock(), "jit")
    refused = await provider.create(other)
    assert isinstance(refused, Refusal) and refused.kind is RefusalKind.FAILED


async def test_a_runner_before_its_job_is_known_reserves_its_queued_jobs_largest_then_its_jobs(
    setup: tuple[RunnerdProvider, FakeRuntime, FakeClock],
) -> None:
    provider, _, clock = setup
    light = JobKey("node", "octo/app", "ci", "lint")
    heavy = JobKey("node", "octo/app", "ci", "e2e")
    seed_history(provider.history, clock.now(), light, [1.0] * 20)
    seed_history(provider.history, clock.now(), heavy, [5.0] * 20)
    hints = (JobHint("octo/app", "ci", "lint"), JobHint("octo/app", "ci", "e2e"))
    assert isinstance(await provider.create(request("a", hints=hints)), Created)
    state = provider.runners["a"]
    assert state.reserved == 6 * G
    assert state.basis.startswith("the largest prediction of its scale set's 2 queued jobs")
    await provider.update_runner("a", JobHint("octo/app", "ci", "lint", "777"))
    assert state.reserved == 2 * G
    row = provider.history.job("777")
    assert row is not None and row["reserved_memory"] == 2 * G and row["job_name"] == "lint"


async def test_a_refusal_is_full_with_its_resource_and_the_wait_is_recorded_by_kind(
    setup: tuple[RunnerdProvider, FakeRuntime, FakeClock],
) -> None:
    provider, runtime, clock = setup
    for name in ("a", "b"):
        assert isinstance(await provider.create(request(name, scale_set="jvm")), Created)
    clock.set(clock.now() + 1)
    refused = await provider.create(request("c", scale_set="jvm"))
    assert isinstance(refused, Refusal)
    assert (refused.kind, refused.resource) == (RefusalKind.FULL, "slots")
    assert refused.message == "All 2 slots of profile jvm are busy"
    # One finishes; the next ask 30 s later is admitted and its record keeps the slot wait.
    runtime.usage["a"] = Usage(memory=3 * G, held=3 * G, cpu_seconds=30.0, exited=True, exit_code=0)
    clock.set(clock.now() + 30)
    await Sampler(provider, clock).tick()
    provider.readings.slice = SliceReading(clock.now(), 0)  # the fake host, not this machine's
    provider.readings.host = HostReading(clock.now(), 64 * G, 60 * G, 0.0, 0)
    assert provider.runners["a"].state is MachineState.STOPPED
    assert isinstance(await provider.create(request("c", scale_set="jvm")), Created)
    row = provider.history.job("3")
    assert row is not None and row["runner"] == "c" and row["slot_wait"] == 30.0


async def test_a_finished_job_teaches_the_predictor_once_rungar_says_how_it_ended(
    setup: tuple[RunnerdProvider, FakeRuntime, FakeClock],
) -> None:
    provider, runtime, clock = setup
    key = JobKey("node", "octo/app", "ci", "build")
    await provider.create(request("a"))
    await provider.update_runner("a", JobHint("octo/app", "ci", "build", "1"))
    reserved = provider.runners["a"].reserved
    runtime.usage["a"] = Usage(memory=int(1.5 * G), held=0, cpu_seconds=60.0)
    sampler = Sampler(provider, clock)
    await sampler.tick()
    clock.set(clock.now() + 60)
    ended = clock.now()
    runtime.usage["a"] = Usage(memory=G, held=0, cpu_seconds=120.0, exited=True, exit_code=0)
    await sampler.tick()
    assert list(provider.predictor.runs(key, clock.now())) == []  # no word from Rungar yet
    clock.set(clock.now() + 1)
    await provider.delete("a", Removal(RemovalReason.JOB_COMPLETED, Conclusion.SUCCEEDED))
    runs = provider.predictor.runs(key, clock.now())
    # its duration from when it took its job (here, at once) to its end: what ends are
    # predicted from
    assert list(runs) == [
        Run(ended, SUCCESS, int(1.5 * G), 7 * G, 2.0, False, False, reserved, 60.0)
    ]
    row = provider.history.job("1")
    assert row is not None and (row["peak_memory"], row["avg_cpu"]) == (int(1.5 * G), 2.0)
    assert (row["finished_at"], row["exit_code"]) == (ended, 0)


async def test_delete_stops_the_runner_and_a_runner_removed_without_a_job_records_no_job_run(
    setup: tuple[RunnerdProvider, FakeRuntime, FakeClock],
) -> None:
    provider, runtime, _ = setup
    await provider.create(request("a"))
    await provider.delete("a", Removal(RemovalReason.SCALED_DOWN))
    await provider.delete("never-existed", Removal(RemovalReason.SCALED_DOWN))
    assert runtime.stopped == ["a"]
    assert await provider.list({}) == []
    assert provider.history.job("1") is None and provider.history.count() == 0


async def test_a_job_is_recorded_with_rungars_conclusion_not_its_runners_exit_status(
    setup: tuple[RunnerdProvider, FakeRuntime, FakeClock],
) -> None:
    provider, runtime, clock = setup
    await provider.create(request("a"))
    hint = JobHint("octo/app", ".github/workflows/ci.yml", "build", "9", "feature/x", "4321")
    await provider.update_runner("a", hint)
    runtime.usage["a"] = Usage(memory=2 * G, held=0, cpu_seconds=1.0, exited=True, exit_code=0)
    await Sampler(provider, clock).tick()
    await provider.delete("a", Removal(RemovalReason.JOB_COMPLETED, Conclusion.FAILED, hint))
    row = provider.history.job("9")
    assert row is not None
    assert (row["result"], row["exit_code"], row["peak_memory"]) == ("failed", 0, 2 * G)
    assert (row["branch"], row["run_id"]) == ("feature/x", "4321")


async def test_a_runner_whose_job_completed_is_given_the_grace_to_exit_and_sampled_to_the_end(
    setup: tuple[RunnerdProvider, FakeRuntime, FakeClock],
) -> None:
    provider, runtime, clock = setup
    await provider.create(request("a"))
    await provider.update_runner("a", JobHint("octo/app", "ci", "build", "1"))
    runtime.usage["a"] = Usage(memory=G, held=G, cpu_seconds=1.0)
    deleting = asyncio.create_task(
        provider.delete("a", Removal(RemovalReason.JOB_COMPLETED, Conclusion.SUCCEEDED))
    )
    await clock.run_for(1.0)
    assert not deleting.done() and runtime.stopped == []  # still within its grace
    runtime.usage["a"] = Usage(memory=3 * G, held=0, cpu_seconds=2.0)
    await clock.run_for(1.0)
    runtime.usage["a"] = Usage(memory=0, held=0, cpu_seconds=2.0, exited=True, exit_code=0)
    await clock.run_for(1.0)
    await deleting
    row = provider.history.job("1")
    assert row is not None and (row["result"], row["peak_memory"]) == ("succeeded", 3 * G)
    assert row["exit_code"] == 0


async def test_a_runner_still_running_after_the_grace_is_stopped_and_keeps_its_jobs_conclusion(
    setup: tuple[RunnerdProvider, FakeRuntime, FakeClock],
) -> None:
    provider, runtime, clock = setup
    await provider.create(request("a"))
    await provider.update_runner("a", JobHint("octo/app", "ci", "build", "1"))
    started = clock.now()
    deleting = asyncio.create_task(
        provider.delete("a", Removal(RemovalReason.JOB_COMPLETED, Conclusion.SUCCEEDED))
    )
    await clock.run_for(provider.config.host.exit_grace + 1)
    await deleting
    assert runtime.stopped == ["a"]
    row = provider.history.job("1")
    assert row is not None and (row["result"], row["exit_code"]) == ("succeeded", None)
    assert row["finished_at"] == started + provider.config.host.exit_grace


async def test_a_job_stopped_while_running_by_a_forced_removal_is_recorded_cancelled(
    setup: tuple[RunnerdProvider, FakeRuntime, FakeClock],
) -> None:
    provider, runtime, _ = setup
    await provider.create(request("a"))
    await provider.update_runner("a", JobHint("octo/app", "ci", "build", "1"))
    await provider.delete("a", Removal(RemovalReason.EXPIRED))
    assert runtime.stopped == ["a"]
    row = provider.history.job("1")
    assert row is not None and row["result"] == "cancelled"


async def test_a_job_rungar_names_in_the_delete_is_recorded_when_its_update_never_came(
    setup: tuple[RunnerdProvider, FakeRuntime, FakeClock],
) -> None:
    provider, runtime, clock = setup
    await provider.create(request("a"))
    runtime.usage["a"] = Usage(memory=G, held=0, cpu_seconds=1.0, exited=True, exit_code=0)
    await Sampler(provider, clock).tick()
    hint = JobHint("octo/app", "ci", "lint", "5", "main", "77")
    await provider.delete("a", Removal(RemovalReason.JOB_COMPLETED, Conclusion.TIMED_OUT, hint))
    row = provider.history.job("5")
    assert row is not None and (row["job_name"], row["result"]) == ("lint", "timed_out")
    assert row["basis"] == "its cap, as its profile has fewer than 10 runs"  # its admission's


class WatchedLock(asyncio.Lock):
    """The provider's lock, telling when a second create asks for it."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = 0
        self.second_asked = asyncio.Event()

    async def acquire(self) -> Literal[True]:
        self.asked += 1
        if self.asked == 2:
            self.second_asked.set()
        return await super().acquire()


class HeldStartRuntime(FakeRuntime):
    """A runtime whose first start lasts until ``release`` is set, as docker's takes a while."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.second_started = asyncio.Event()

    async def start(self, spec: RunnerSpec) -> str:
        if self.started:
            self.second_started.set()
        else:
            self.started[spec.name] = spec  # the first is on its way
            await asyncio.wait_for(self.release.wait(), 30)
        return await super().start(spec)


class UnlockedProvider(RunnerdProvider):
    """runnerd without its create lock: the negative control."""

    async def create(self, request: CreateRequest) -> Created | Refusal:
        return await self._create(request)


async def two_creates_for_the_last_slot(
    tmp_path: Path, provider_type: type[RunnerdProvider]
) -> list[Created | Refusal]:
    """Two creates asked at once for a profile with one slot, the first runner still starting
    when the second asks."""
    runtime = HeldStartRuntime()
    history = History(tmp_path / "history.db")
    text = CONFIG.replace("slots = 2", "slots = 1")
    config = parse_config(text.replace("[host]", f'[host]\nstate_dir = "{tmp_path}"'))
    clock = FakeClock()
    provider = provider_type(config, runtime, history, clock, 33 * G, 32.0, host_memory=64 * G)
    provider.readings.slice = SliceReading(clock.now(), 0)
    provider.readings.host = HostReading(clock.now(), 64 * G, 60 * G, 0.0, 0)
    lock = WatchedLock()
    provider._lock = lock  # the same lock, watched
    first = asyncio.ensure_future(provider.create(request("jvm-1", profile="jvm")))
    second = asyncio.ensure_future(provider.create(request("jvm-2", profile="jvm")))
    # The second either waits for the lock, or (without one) reaches the runtime too.
    waiting = asyncio.ensure_future(lock.second_asked.wait())
    reached = asyncio.ensure_future(runtime.second_started.wait())
    await asyncio.wait({waiting, reached}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    reached.cancel()
    runtime.release.set()
    answers = await asyncio.wait_for(asyncio.gather(first, second), 30)
    history.close()
    return list(answers)


async def test_two_creates_at_once_never_both_take_the_last_slot(tmp_path: Path) -> None:
    """runnerd admits one create at a time: the second waits, sees the first and is refused."""
    first, second = await two_creates_for_the_last_slot(tmp_path, RunnerdProvider)
    assert isinstance(first, Created)
    assert isinstance(second, Refusal) and second.resource == "slots"


async def test_without_the_create_lock_both_creates_take_the_last_slot(tmp_path: Path) -> None:
    """The negative control: the check above sees a runnerd that admits creates side by side."""
    answers = await two_creates_for_the_last_slot(tmp_path, UnlockedProvider)
    assert [type(a) for a in answers] == [Created, Created]


def test_a_containers_log_stream_loses_its_frame_headers_and_keeps_its_last_lines() -> None:
    from runnerd.runtime.docker import demultiplex

    from rungar.model.output import tail_lines

    def frame(stream: int, text: bytes) -> bytes:
        return bytes([stream, 0, 0, 0]) + len(text).to_bytes(4, "big") + text

    data = frame(1, b"boot\nstarting\n") + frame(2, b"Error: bad token\n")
    assert tail_lines(demultiplex(data), 2) == ["starting", "Error: bad token"]
    assert demultiplex(b"plain tty output\n") == b"plain tty output\n"
