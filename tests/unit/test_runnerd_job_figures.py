"""A job's figures as runnerd records them (docs/runnerd.md, "Every figure, defined once"):
slot waits from this job's queue time, run time and average CPU from its start, a reserve
runner's idle time apart, and a queue that empties once the jobs it waited for have started."""

from __future__ import annotations

from dataclasses import replace

from runnerd.admission.model import HostReading, SliceReading
from runnerd.api import status
from runnerd.figures import HeldSpan, held_back, job_figures, queued_by_our_clock
from runnerd.provider import RunnerdProvider
from runnerd.runtime.base import Usage
from runnerd.sampler import Sampler

from rungar.model.machine import Conclusion, Created, JobHint, Refusal, Removal
from rungar.model.runner import RemovalReason
from rungar.testing.clock import FakeClock
from tests.unit.test_runnerd_provider import FakeRuntime, G, request, setup

__all__ = ["setup"]  # the fixture, shared with the provider's tests


def hint(job_id: str, queued: float = 0.0, started: float = 0.0) -> JobHint:
    return JobHint("octo/app", "ci", "build", job_id, "main", "9", queued, started)


def fresh(provider: RunnerdProvider, clock: FakeClock) -> None:
    """The fake host's readings, as of now (the sampler reads this machine's otherwise)."""
    provider.readings.slice = SliceReading(clock.now(), 0)
    provider.readings.host = HostReading(clock.now(), 64 * G, 60 * G, 0.0, 0)


async def test_a_jobs_slot_wait_counts_the_refusals_after_it_queued_not_an_earlier_one(
    setup: tuple[RunnerdProvider, FakeRuntime, FakeClock],
) -> None:
    provider, runtime, clock = setup
    t0 = clock.now()
    for name in ("a", "b"):
        assert isinstance(await provider.create(request(name, scale_set="jvm")), Created)
    # An early job is refused at t0+1 and then leaves the queue without a runner here.
    clock.set(t0 + 1)
    refused = await provider.create(request("c", "jvm", (hint("early", t0 + 1),)))
    assert isinstance(refused, Refusal)
    # 47 s later a slot is free; a new job queues at t0+48 and is admitted at once.
    runtime.usage["a"] = Usage(memory=G, held=G, cpu_seconds=1.0, exited=True, exit_code=0)
    clock.set(t0 + 48)
    await Sampler(provider, clock).tick()
    fresh(provider, clock)
    assert isinstance(await provider.create(request("d", "jvm", (hint("late", t0 + 48),))), Created)
    clock.set(t0 + 50)
    await provider.update_runner("d", hint("late", t0 + 48, t0 + 50))
    row = provider.history.job("late")
    assert row is not None
    assert row["slot_wait"] == 0.0  # the early job's refusal is not charged to it
    assert (row["queued_at"], row["job_started_at"]) == (t0 + 48, t0 + 50)
    assert (row["github_queued_at"], row["github_started_at"]) == (t0 + 48, t0 + 50)


async def test_a_job_admitted_at_its_first_ask_is_charged_nothing_while_an_old_refusal_is_open(
    setup: tuple[RunnerdProvider, FakeRuntime, FakeClock],
) -> None:
    provider, runtime, clock = setup
    t0 = clock.now()
    for name in ("a", "b"):
        assert isinstance(await provider.create(request(name, scale_set="jvm")), Created)
    clock.set(t0 + 1)
    assert isinstance(await provider.create(request("c", "jvm", (hint("early", t0 + 1),))), Refusal)
    # The early job goes elsewhere; its refusal is still the scale set's last here when a new
    # job queues at t0+44 and its runner is admitted at the first ask, at t0+48.
    runtime.usage["a"] = Usage(memory=G, held=G, cpu_seconds=1.0, exited=True, exit_code=0)
    clock.set(t0 + 48)
    await Sampler(provider, clock).tick()
    fresh(provider, clock)
    assert isinstance(await provider.create(request("d", "jvm", (hint("late", t0 + 44),))), Created)
    clock.set(t0 + 50)
    await provider.update_runner("d", hint("late", t0 + 44, t0 + 50))
    row = provider.history.job("late")
    assert row is not None and row["queued_at"] == t0 + 44
    assert row["slot_wait"] == 0.0  # not "held back 4s by this host for a slot"


async def test_a_job_held_back_through_refusals_and_admissions_of_others_is_charged_all_of_it(
    setup: tuple[RunnerdProvider, FakeRuntime, FakeClock],
) -> None:
    provider, runtime, clock = setup
    t0 = clock.now()
    for name in ("a", "b"):
        assert isinstance(await provider.create(request(name, scale_set="jvm")), Created)
    queued = (hint("j1", t0), hint("j2", t0))
    clock.set(t0 + 1)
    assert isinstance(await provider.create(request("c", "jvm", queued)), Refusal)
    # At t0+20 one slot frees: j1's runner starts; j2 is refused again until t0+40.
    runtime.usage["a"] = Usage(memory=G, held=G, cpu_seconds=1.0, exited=True, exit_code=0)
    clock.set(t0 + 20)
    await Sampler(provider, clock).tick()
    fresh(provider, clock)
    assert isinstance(await provider.create(request("c", "jvm", queued)), Created)
    clock.set(t0 + 21)
    assert isinstance(await provider.create(request("d", "jvm", queued[1:])), Refusal)
    await provider.update_runner("c", hint("j1", t0, t0 + 21))
    runtime.usage["b"] = Usage(memory=G, held=G, cpu_seconds=1.0, exited=True, exit_code=0)
    clock.set(t0 + 40)
    await Sampler(provider, clock).tick()
    fresh(provider, clock)
    assert isinstance(await provider.create(request("d", "jvm", queued[1:])), Created)
    clock.set(t0 + 41)
    await provider.update_runner("d", hint("j2", t0, t0 + 41))
    first, second = provider.history.job("j1"), provider.history.job("j2")
    assert first is not None and second is not None
    assert first["slot_wait"] == 19.0  # refused from t0+1 until its runner started at t0+20
    assert second["slot_wait"] == 38.0  # t0+1 to t0+40, less the moment between two asks
    assert job_figures(second)["wait"] == 41.0


async def test_a_reserve_runners_idle_time_is_reported_apart_from_its_jobs_run(
    setup: tuple[RunnerdProvider, FakeRuntime, FakeClock],
) -> None:
    provider, runtime, clock = setup
    t0 = clock.now()
    assert isinstance(await provider.create(request("r")), Created)  # a reserve: no job yet
    sampler = Sampler(provider, clock)
    for t, cpu in ((10, 0.5), (99, 1.0)):  # it idles, spending a little CPU
        clock.set(t0 + t)
        runtime.usage["r"] = Usage(memory=G // 10, held=0, cpu_seconds=cpu)
        await sampler.tick()
    clock.set(t0 + 100)
    await provider.update_runner("r", hint("j", t0 + 99, t0 + 100))
    clock.set(t0 + 110)
    runtime.usage["r"] = Usage(memory=G, held=0, cpu_seconds=6.0)
    await sampler.tick()
    clock.set(t0 + 120)
    runtime.usage["r"] = Usage(memory=G, held=0, cpu_seconds=11.0, exited=True, exit_code=0)
    await sampler.tick()
    job = hint("j", t0 + 99, t0 + 100)
    await provider.delete("r", Removal(RemovalReason.JOB_COMPLETED, Conclusion.SUCCEEDED, job))
    row = provider.history.job("j")
    assert row is not None
    figures = job_figures(row)
    assert (figures["duration"], figures["idle"], figures["slot_wait"]) == (20.0, 99.0, 0.0)
    assert row["avg_cpu"] == 0.5  # 10 CPU-seconds over its 20 s run, not over 120 s
    assert row["peak_cpu"] == 0.5  # the job's own, not its runner's idle life's


async def test_a_reserve_runner_waiting_for_its_job_is_not_busy_on_the_utilization_page(
    setup: tuple[RunnerdProvider, FakeRuntime, FakeClock],
) -> None:
    from runnerd.dashboard.views import ProfileCapacity, utilization

    provider, _, clock = setup
    t0 = clock.now()
    assert isinstance(await provider.create(request("r")), Created)  # a reserve: no job yet
    clock.set(t0 + 100)
    rows = provider.history.open_jobs()
    node = ProfileCapacity("node", 8, 7 * G, 8.0)
    (found,) = utilization(rows, [node], t0, t0 + 100, 4, t0 + 100)
    assert (found.busy, found.occupied) == (0.0, 1 / 8)  # one of 8 slots, idle throughout


async def test_the_queue_empties_once_the_jobs_it_was_refused_for_have_started(
    setup: tuple[RunnerdProvider, FakeRuntime, FakeClock],
) -> None:
    provider, _, clock = setup
    for name in ("a", "b"):
        assert isinstance(await provider.create(request(name, scale_set="jvm")), Created)
    clock.set(clock.now() + 1)
    assert isinstance(await provider.create(request("c", "jvm", (hint("j1"),))), Refusal)
    assert [q["scale_set"] for q in status(provider)["queue"]] == ["jvm"]
    # A runner that was already waiting takes the job: Rungar asks for no more.
    await provider.update_runner("a", hint("j1", clock.now() - 1, clock.now()))
    assert status(provider)["queue"] == []


async def test_a_queue_entrys_kind_says_what_its_refusal_says_ran_out(
    setup: tuple[RunnerdProvider, FakeRuntime, FakeClock],
) -> None:
    provider, _, _ = setup
    for name in ("a", "b", "c", "d"):  # node: 4 runners at their 7G caps in 33G
        assert isinstance(await provider.create(request(name)), Created)
    refused = await provider.create(request("e", "node", (hint("j1"),)))
    assert isinstance(refused, Refusal) and refused.resource == "memory"
    (entry,) = status(provider)["queue"]
    assert (entry["kind"], entry["waits_for"]) == ("memory", "memory (MemoryMax)")
    assert entry["why"] == refused.message
    # Its time still counts as a wait for a slot: sizing's slots or the budget.
    assert provider.waiting["node"].kind == "slot"


async def test_the_queue_empties_once_the_jobs_it_was_refused_for_ran_on_another_host(
    setup: tuple[RunnerdProvider, FakeRuntime, FakeClock],
) -> None:
    provider, _, clock = setup
    for name in ("a", "b"):
        assert isinstance(await provider.create(request(name, scale_set="jvm")), Created)
    clock.set(clock.now() + 1)
    refused = await provider.create(request("c", "jvm", (hint("j1"), hint("j2"))))
    assert isinstance(refused, Refusal)
    # Rungar tells the queue as jobs leave it, naming the runner this host refused.
    await provider.queue_changed("c", (hint("j2"), hint("j3")))
    assert [q["scale_set"] for q in status(provider)["queue"]] == ["jvm"]  # j2 still waits
    clock.set(clock.now() + 2)
    await provider.queue_changed("c", ())
    assert status(provider)["queue"] == []
    # The refusal's stretch ended there: a job queued since is charged nothing for it.
    assert provider.held["jvm"][-1].end == clock.now()


async def test_a_queue_entry_rungar_stopped_asking_for_is_forgotten(
    setup: tuple[RunnerdProvider, FakeRuntime, FakeClock],
) -> None:
    provider, _, clock = setup
    for name in ("a", "b"):
        assert isinstance(await provider.create(request(name, scale_set="jvm")), Created)
    clock.set(clock.now() + 1)
    assert isinstance(await provider.create(request("c", "jvm", (hint("gone"),))), Refusal)
    clock.set(clock.now() + provider.config.host.cpu_wait_forget + 1)
    assert status(provider)["queue"] == [] and provider.waiting == {}


def test_held_back_counts_each_refusal_from_the_queue_time_on_until_the_runners_start() -> None:
    spans = [HeldSpan(0, 10, "slot"), HeldSpan(10, 20, "host"), HeldSpan(30, 40, "slot")]
    # The refusal at 0 came before the job queued at 5: it held other jobs back, not this one.
    assert held_back(spans, 5, 35) == {"slot": 5.0, "host": 10.0, "cpu": 0.0}
    assert held_back(spans, 50, 60) == {"slot": 0.0, "host": 0.0, "cpu": 0.0}


def test_githubs_queue_time_is_converted_by_the_hints_offset_else_through_the_jobs_start() -> None:
    # GitHub's clock runs 300 s ahead of this host's, and Rungar measured it so: -300.
    assert queued_by_our_clock(1300.0, 1310.0, 1010.0, None, offset=-300.0) == 1000.0
    # Converted when runnerd first heard of the job: that stands, whatever the start says.
    assert queued_by_our_clock(1300.0, 1900.0, 1010.0, 1005.0, 1001.0, -300.0) == 1001.0
    # From a Rungar that measures no offset: moved through the job's start.
    assert queued_by_our_clock(1300.0, 1310.0, 1010.0, None) == 1000.0
    assert queued_by_our_clock(0.0, 0.0, 1010.0, 1004.0) == 1004.0
    assert queued_by_our_clock(0.0, 0.0, 1010.0, None) is None


async def test_on_a_compressed_github_clock_the_queue_time_stays_on_runnerds_clock(
    setup: tuple[RunnerdProvider, FakeRuntime, FakeClock],
) -> None:
    """GitHub's clock runs 60 times as fast as runnerd's (the emulator's compressed clock): a
    job queued 3 s before its runner took it shows a 180 s wait on GitHub's. Its queue time is
    GitHub's converted once, by the offset Rungar measured as the job's message came, not
    GitHub's wait taken from runnerd's clock, which would land before the host existed and
    charge the job an earlier burst's refusals."""
    provider, runtime, clock = setup
    t0 = clock.now()
    for name in ("a", "b"):
        assert isinstance(await provider.create(request(name, scale_set="jvm")), Created)
    clock.set(t0 + 1)  # an earlier job is refused, then served elsewhere
    assert isinstance(await provider.create(request("c", "jvm", (hint("early"),))), Refusal)
    runtime.usage["a"] = Usage(memory=G, held=G, cpu_seconds=1.0, exited=True, exit_code=0)
    clock.set(t0 + 100)
    await Sampler(provider, clock).tick()
    fresh(provider, clock)
    github = 50_000.0  # GitHub's clock as the job queues at runnerd's t0+100
    offset = (t0 + 100) - github
    job = replace(hint("late", github), clock_offset=offset)
    clock.set(t0 + 101)
    assert isinstance(await provider.create(request("d", "jvm", (job,))), Created)
    clock.set(t0 + 103)
    started = replace(job, started_at=github + 180.0)  # 3 s later, 180 s on GitHub's clock
    await provider.update_runner("d", started)
    row = provider.history.job("late")
    assert row is not None
    assert row["queued_at"] == t0 + 100  # not t0+103-180, before the runner was asked for
    assert row["slot_wait"] == 0.0 and job_figures(row)["wait"] == 3.0
    assert (row["github_queued_at"], row["github_started_at"]) == (github, github + 180.0)


async def test_the_job_pages_cpu_chart_and_the_records_peak_cpu_are_the_same_samples(
    setup: tuple[RunnerdProvider, FakeRuntime, FakeClock],
) -> None:
    from runnerd.dashboard.timeline import Timeline

    provider, runtime, clock = setup
    timeline = Timeline()
    provider.sample_listeners.append(lambda state: timeline.observe((state,)))
    t0 = clock.now()
    assert isinstance(await provider.create(request("r")), Created)
    sampler = Sampler(provider, clock)
    spent = 0.0
    for t, rate in ((1, 0.0), (2, 0.4), (3, 0.05), (4, 0.1), (5, 0.13), (6, 0.02)):
        if t == 3:
            await provider.update_runner("r", hint("j", t0 + 2.5, t0 + 3))
        spent += rate
        clock.set(t0 + t)
        runtime.usage["r"] = Usage(memory=G, held=0, cpu_seconds=spent)
        await sampler.tick()
    runtime.usage["r"] = Usage(memory=G, held=0, cpu_seconds=spent, exited=True, exit_code=0)
    clock.set(t0 + 7)
    await sampler.tick()
    await provider.delete("r", Removal(RemovalReason.JOB_COMPLETED, Conclusion.SUCCEEDED))
    row = provider.history.job("j")
    series = timeline.series("r")
    assert row is not None and series is not None
    from_start = [c for at, c in zip(series.times, series.cpu, strict=True) if at > t0 + 3]
    assert row["peak_cpu"] == max(c for c in from_start if c is not None) == 0.13


async def test_sizing_and_the_replay_read_a_reserve_runners_job_from_its_own_start(
    setup: tuple[RunnerdProvider, FakeRuntime, FakeClock],
) -> None:
    from runnerd.sizing.runs import open_read_only, read_runs

    provider, runtime, clock = setup
    t0 = clock.now()
    assert isinstance(await provider.create(request("r")), Created)
    clock.set(t0 + 100)
    await provider.update_runner("r", hint("j", t0 + 99, t0 + 100))
    clock.set(t0 + 120)
    runtime.usage["r"] = Usage(memory=G, held=0, cpu_seconds=5.0, exited=True, exit_code=0)
    await Sampler(provider, clock).tick()
    await provider.delete("r", Removal(RemovalReason.JOB_COMPLETED, Conclusion.SUCCEEDED))
    with open_read_only(provider.history.path) as db:
        (run,) = read_runs(db, t0, t0 + 200)
    assert (run.started_at, run.run_started_at, run.arrived_at) == (t0, t0 + 100, t0 + 99)
    assert run.finished_at - run.run_started_at == 20.0  # what the replay runs it for
    assert run.slots == 8
