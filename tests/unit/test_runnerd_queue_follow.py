"""A waiting runner's reservation follows the heaviest job its scale set has queued; the slice's
MemoryMax and CPUs are read again as they change."""

from __future__ import annotations

from pathlib import Path

import pytest
from runnerd.admission import GuardState, HostReading, Limits, Policy, Running, SliceReading
from runnerd.admission.admit import fits_beside
from runnerd.config import parse_config
from runnerd.events import EventLog
from runnerd.history import History, JobKey
from runnerd.provider import RunnerdProvider, slice_limits
from runnerd.sampler import Sampler

from rungar.model.machine import Created, JobHint, MachineState, Refusal
from rungar.testing.clock import FakeClock
from tests.unit.test_runnerd_provider import (
    CONFIG,
    FakeRuntime,
    G,
    request,
    seed_history,
    setup,
)

__all__ = ["setup"]  # the fixture, shared with the provider's tests

LINT = JobHint("octo/app", "ci", "lint")
E2E = JobHint("octo/app", "ci", "e2e")


def with_history(provider: RunnerdProvider, clock: FakeClock) -> None:
    seed_history(
        provider.history, clock.now(), JobKey("node", "octo/app", "ci", "lint"), [1.0] * 20
    )
    seed_history(provider.history, clock.now(), JobKey("node", "octo/app", "ci", "e2e"), [5.0] * 20)


async def test_a_waiting_runner_is_re_reserved_when_a_heavier_job_queues_for_its_scale_set(
    setup: tuple[RunnerdProvider, FakeRuntime, FakeClock],
) -> None:
    provider, _, clock = setup
    with_history(provider, clock)
    assert isinstance(await provider.create(request("a", hints=(LINT,))), Created)
    assert provider.runners["a"].reserved == 2 * G
    # The next create of the scale set brings its queue, now with a heavier job in it.
    assert isinstance(await provider.create(request("b", hints=(LINT, E2E))), Created)
    waiting = provider.runners["a"]
    assert waiting.reserved == 6 * G
    assert waiting.basis.startswith("the largest prediction of its scale set's 2 queued jobs")
    # The heavy job leaving the queue does not lower it: it may be this runner's, not yet told.
    await provider.create(request("d", hints=(LINT,)))
    assert waiting.reserved == 6 * G
    # Once its job is known it reserves that job's prediction, and the queue no longer moves it.
    await provider.update_runner("a", JobHint("octo/app", "ci", "lint", "7"))
    await provider.create(request("c", hints=(E2E, E2E, E2E)))
    assert provider.runners["a"].reserved == 2 * G


async def test_a_waiting_runner_whose_new_reservation_no_longer_fits_is_stopped(
    setup: tuple[RunnerdProvider, FakeRuntime, FakeClock],
) -> None:
    provider, runtime, clock = setup
    with_history(provider, clock)
    provider.events = EventLog(provider.history.path)
    for name in ("x", "y"):  # 2 × 14G at their caps: 5G of the 33G is left
        assert isinstance(await provider.create(request(name, scale_set="jvm")), Created)
    assert isinstance(await provider.create(request("a", hints=(LINT,))), Created)
    refused = await provider.create(request("b", hints=(LINT, E2E)))
    assert isinstance(refused, Refusal) and refused.resource == "memory"
    assert runtime.stopped == ["a"]
    (listed,) = await provider.list({"rungar.sh/runner": "a"})
    assert listed.state is MachineState.STOPPED  # Rungar lets it go and removes its registration
    (event,) = provider.events.after(0)
    assert event.kind == "runner.stopped" and "a heavier job queued for node" in event.message
    provider.events.close()


async def test_a_runner_with_its_job_is_never_stopped_for_the_queue(
    setup: tuple[RunnerdProvider, FakeRuntime, FakeClock],
) -> None:
    provider, runtime, clock = setup
    with_history(provider, clock)
    for name in ("x", "y"):
        await provider.create(request(name, scale_set="jvm"))
    await provider.create(request("a", hints=(LINT,)))
    await provider.update_runner("a", JobHint("octo/app", "ci", "lint", "9"))
    await provider.create(request("b", hints=(LINT, E2E)))
    assert runtime.stopped == [] and provider.runners["a"].state is MachineState.RUNNING


async def test_a_memory_max_changed_by_a_systemd_reload_counts_from_the_next_sample(
    tmp_path: Path,
) -> None:
    slice_dir = tmp_path / "cgroup" / "runnerd.slice"
    slice_dir.mkdir(parents=True)
    (slice_dir / "memory.max").write_text(f"{8 * G}\n")
    (slice_dir / "cpu.max").write_text("400000 100000\n")
    (slice_dir / "cpuset.cpus.effective").write_text("0-15\n")
    text = CONFIG.replace('memory_max = "33G"\n', "").replace("cpus = 32\n", "")
    text = text.replace(
        "[host]", f'[host]\nstate_dir = "{tmp_path}"\ncgroup_root = "{tmp_path}/cgroup"'
    )
    config = parse_config(text)
    history = History(tmp_path / "history.db")
    clock = FakeClock()
    provider = RunnerdProvider(config, FakeRuntime(), history, clock, *slice_limits(config))
    provider.events = EventLog(history.path)
    try:
        assert (provider.limits.memory_max, provider.limits.cpu_budget) == (8 * G, 4.0)
        (slice_dir / "memory.max").write_text(f"{16 * G}\n")  # systemctl daemon-reload
        (slice_dir / "cpu.max").write_text("800000 100000\n")
        await Sampler(provider, clock).tick()
        assert (provider.limits.memory_max, provider.limits.cpu_budget) == (16 * G, 8.0)
        (event,) = provider.events.after(0)
        assert event.kind == "slice.changed" and "MemoryMax 16G (was 8G)" in event.message
    finally:
        provider.events.close()
        history.close()


OTHER = Running("x", "jvm", "jvm", 14 * G, 8.0, 10 * G, 4.0, used=2 * G, used_at=0.0)
MEASURED = Limits(policy=Policy.MEASURED, memory_max=33 * G, cpu_budget=16.0)


@pytest.mark.parametrize(
    ("memory", "cpu", "host", "limits", "fits"),
    [
        (23 * G, 4.0, None, MEASURED, True),  # 10G reserved beside it: 23G of 33G is left
        (24 * G, 4.0, None, MEASURED, False),  # past MemoryMax
        (8 * G, 12.1, None, MEASURED, False),  # past the CPU budget of 16, 4 reserved
        (8 * G, 12.0, None, Limits(policy=Policy.MEASURED, memory_max=33 * G), True),
        # The host leaves the slice 2G held + 12G available - the 4G margin = 10G: 0 beside 10G.
        (1 * G, 1.0, HostReading(0.0, 64 * G, 12 * G, 0.0, 2 * G), MEASURED, False),
        (1 * G, 1.0, HostReading(0.0, 64 * G, 20 * G, 0.0, 2 * G), MEASURED, True),
    ],
)
def test_a_new_reservation_fits_beside_the_others_by_memory_max_host_and_cpu(
    memory: int, cpu: float, host: HostReading | None, limits: Limits, fits: bool
) -> None:
    reading = SliceReading(0.0, 12 * G)
    assert fits_beside(memory, cpu, [OTHER], reading, host, limits, GuardState(), 0.0) is fits


async def test_a_waiting_runner_is_re_reserved_by_a_queue_update_when_a_create_goes_elsewhere(
    setup: tuple[RunnerdProvider, FakeRuntime, FakeClock], tmp_path: Path
) -> None:
    from rungar.rpc.client import GrpcProvider
    from rungar.rpc.server import serve

    provider, _, clock = setup
    with_history(provider, clock)
    assert isinstance(await provider.create(request("a", hints=(LINT,))), Created)
    assert provider.runners["a"].reserved == 2 * G
    server = await serve(provider, f"unix://{tmp_path}/p.sock")
    client = GrpcProvider("host1", f"unix://{tmp_path}/p.sock", timeout=10)
    try:
        # Rungar's UpdateRunner without a job: the scale set's queue, with a heavier job in it.
        await client.queue_changed("a", (LINT, E2E))
    finally:
        await client.close()
        await server.stop()
    waiting = provider.runners["a"]
    assert waiting.reserved == 6 * G and waiting.job is None
    assert waiting.basis.startswith("the largest prediction of its scale set's 2 queued jobs")


async def test_a_queue_update_is_never_taken_for_the_job_a_runner_took(tmp_path: Path) -> None:
    from rungar.rpc.client import GrpcProvider
    from rungar.rpc.server import serve
    from rungar.testing.fake_provider import FakeProvider

    fake = FakeProvider("plain", vcpus=8, memory_bytes=16 * G)
    assert isinstance(await fake.create(request("a", hints=(LINT,))), Created)
    server = await serve(fake, f"unix://{tmp_path}/f.sock")
    client = GrpcProvider("plain", f"unix://{tmp_path}/f.sock", timeout=10)
    try:
        await client.queue_changed("a", (LINT, E2E))  # a provider that does not follow queues
    finally:
        await client.close()
        await server.stop()
    assert "a" not in fake.jobs
