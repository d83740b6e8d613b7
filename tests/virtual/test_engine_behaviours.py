"""The engine's behaviours over time, on the virtual clock (tests/virtual/harness.py): the real
Engine, placement, reconcile passes and SQLite state, with in-process providers and GitHub.

Each test states one behaviour and drives minutes or hours of a fleet in milliseconds; the
seeded ones run several seeds and print the failing one with the command that replays it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rungar.cli.status import render_status
from rungar.config.loader import parse_scale_sets
from rungar.config.model import ScaleSetsFile
from rungar.daemon.status import snapshot
from rungar.model.machine import Created, CreateRequest, MachineState, Refusal, RefusalKind
from tests.virtual.harness import Host, VirtualFleet, seeds

TIMING = "timing: {reconcile_interval: 30s, backoff_first: 15s, backoff_max: 2m, left_grace: 0s}"


def config(scale_sets: str, providers: str = "a", timing: str = TIMING) -> ScaleSetsFile:
    listed = "".join(
        f"  - {{name: {p}, type: fake, runner: {{vcpus: 2, memory: 4GiB}}}}\n"
        for p in providers.split()
    )
    text = f"version: 1\n{timing}\nproviders:\n{listed}scale_sets:\n{scale_sets}"
    return parse_scale_sets(text, "virtual.yaml")


async def started(fleet: VirtualFleet) -> VirtualFleet:
    await fleet.start()
    return fleet


# ---------------------------------------------------------------------- scaling


@pytest.mark.parametrize("seed", seeds(range(3)))
async def test_a_burst_scales_up_to_max_runners_and_back_to_zero_when_its_jobs_are_done(
    tmp_path: Path, seed: int
) -> None:
    cfg = config("  - {name: linux, max_runners: 6, providers: [a, b]}\n", "a b")
    fleet = await started(VirtualFleet(tmp_path, cfg, {"a": Host(), "b": Host()}, seed=seed))
    for _ in range(4):  # four waves of a random burst, a few minutes apart
        at = fleet.clock.now() + fleet.rng.uniform(0, 600)
        fleet.queue_at(at, "linux", fleet.rng.randint(1, 12), fleet.rng.uniform(60, 900))
    peak = 0
    while fleet.arrivals or not fleet.all_done():
        await fleet.run_for(10)
        peak = max(peak, len(fleet.engine.runners.live("linux")))
    assert peak == 6, f"seed {seed}: the burst takes every runner max_runners allows"
    await fleet.run_until_done()
    assert fleet.engine.runners.live("linux") == []
    assert fleet.machines_on("a") == fleet.machines_on("b") == [], "every machine deleted"
    assert fleet.github.runners == {}, "every registration gone"
    assert set(fleet.removals().values()) == {"job_completed"}


async def test_idle_runners_beyond_the_jobs_are_scaled_down_and_busy_ones_kept(
    tmp_path: Path,
) -> None:
    cfg = config("  - {name: linux, max_runners: 6, providers: [a]}\n")
    fleet = await started(VirtualFleet(tmp_path, cfg, {"a": Host()}))
    jobs = await fleet.queue("linux", 4, duration=600)
    await fleet.run_for(1)  # registered and created, not yet booted: nothing is busy
    assert len(fleet.engine.runners.live("linux")) == 4
    for job in jobs[:2]:  # cancelled before a runner took them: demand falls to two
        fleet.queued["linux"].remove(job.id)
        job.done_at = fleet.clock.now()
    fleet.engine.on_demand("linux", fleet.assigned("linux"))
    await fleet.run_for(60)
    assert len(fleet.engine.runners.live("linux")) == 2
    assert sorted(fleet.removals().values()) == ["scaled_down", "scaled_down"]
    assert all(j.started_at is not None for j in jobs[2:]), "the two left run their jobs"


async def test_min_runners_keeps_an_idle_reserve_through_a_burst(tmp_path: Path) -> None:
    cfg = config("  - {name: linux, max_runners: 8, min_runners: 2, providers: [a]}\n")
    fleet = await started(VirtualFleet(tmp_path, cfg, {"a": Host()}))
    await fleet.run_for(30)
    assert len(fleet.engine.runners.live("linux")) == 2, "the reserve with no job"
    await fleet.queue("linux", 3, duration=300)
    await fleet.run_for(60)
    assert len(fleet.engine.runners.live("linux")) == 5, "three for the jobs, two idle"
    await fleet.run_until_done()
    assert len(fleet.engine.runners.live("linux")) == 2, "the reserve stays"


# ---------------------------------------------------------------------- providers refusing


async def test_a_full_provider_is_skipped_the_jobs_run_on_the_next_and_status_says_why(
    tmp_path: Path,
) -> None:
    # What tests/e2e/test_daemon_cli.py checked on the wall clock with a daemon process.
    cfg = config(
        "  - {name: linux, max_runners: 8, placement: pack, providers: [full, roomy]}\n",
        "full roomy",
    )
    fleet = await started(VirtualFleet(tmp_path, cfg, {"full": Host(), "roomy": Host()}))
    fleet.providers["full"].refuse(
        RefusalKind.FULL, always=True, resource="memory", message="no memory left"
    )
    await fleet.queue("linux", 3, duration=60)
    await fleet.run_for(1)
    document = snapshot(fleet.engine.ctx)
    assert {r["provider"] for r in document["runners"]} == {"roomy"}
    assert len(document["runners"]) == 3
    assert fleet.machines_on("full") == [], "a refused create leaves nothing"
    assert "  linux found full full; tries it again in" in render_status(document)
    await fleet.run_until_done()
    assert fleet.machines_on("roomy") == []
    assert snapshot(fleet.engine.ctx)["runners"] == []


# ---------------------------------------------------------------------- priority holds


HOLD_SETS = """\
  - {name: small, max_runners: 20, providers: [{name: a, runner: {vcpus: 2, memory: 4GiB}}]}
  - name: large
    max_runners: 2
    priority: 10
    providers: [{name: a, runner: {vcpus: 8, memory: 16GiB}}]
"""


async def test_a_large_runner_refused_full_during_a_burst_holds_the_small_ones_off_until_it_fits(
    tmp_path: Path,
) -> None:
    fleet = await started(
        VirtualFleet(tmp_path, config(HOLD_SETS), {"a": Host(vcpus=16, memory_gib=32)})
    )
    small = await fleet.queue("small", 8, duration=600)  # fills the host: 8 x 4 GiB
    await fleet.run_for(10)
    (large,) = await fleet.queue("large", 1, duration=300)
    await fleet.run_for(1)
    hold = fleet.engine.fleet.hold_on("a", fleet.clock.now())
    assert hold is not None and hold.holder == "large"
    text = render_status(snapshot(fleet.engine.ctx))
    assert "HELD for large (priority 10)" in text, text
    burst = await fleet.queue("small", 6, duration=600)  # arrives while the hold stands
    await fleet.run_for(900)  # the first eight end at 600 s
    assert large.started_at is not None, "the large runner took the first room"
    first_small = min(j.started_at for j in burst if j.started_at is not None)
    assert large.started_at <= first_small, "no small runner took the room before it"
    assert all(j.started_at is not None for j in small)
    await fleet.run_until_done()
    assert fleet.engine.fleet.hold_on("a", fleet.clock.now()) is None


async def test_without_priority_the_small_burst_keeps_the_large_runner_waiting(
    tmp_path: Path,
) -> None:
    # The other side of the test above: it fails if holds were taken at equal priority.
    sets = HOLD_SETS.replace("priority: 10", "priority: 0")
    fleet = await started(
        VirtualFleet(tmp_path, config(sets), {"a": Host(vcpus=16, memory_gib=32)})
    )
    await fleet.queue("small", 8, duration=600)
    await fleet.run_for(10)
    (large,) = await fleet.queue("large", 1, duration=300)
    burst = await fleet.queue("small", 6, duration=600)
    await fleet.run_for(900)
    assert fleet.engine.fleet.hold_on("a", fleet.clock.now()) is None
    assert all(j.started_at is not None for j in burst[:4]), "small runners refill the room"
    assert large.started_at is None


# ---------------------------------------------------------------------- restart


@pytest.mark.parametrize("seed", seeds(range(3)))
async def test_a_restart_on_the_same_state_file_adopts_every_runner_and_duplicates_none(
    tmp_path: Path, seed: int
) -> None:
    cfg = config("  - {name: linux, max_runners: 10, providers: [a, b]}\n", "a b")
    fleet = await started(VirtualFleet(tmp_path, cfg, {"a": Host(), "b": Host()}, seed=seed))
    await fleet.queue("linux", fleet.rng.randint(3, 10), duration=fleet.rng.uniform(120, 900))
    await fleet.run_for(fleet.rng.uniform(0, 100))
    before = {r.name for r in fleet.engine.runners.live("linux")}
    await fleet.restart()
    after = {r.name for r in fleet.engine.runners.live("linux")}
    assert after == before, f"seed {seed}: every runner adopted, none created twice"
    adopted = [e for e in fleet.engine.events.recent() if e.action == "adopted"]
    assert {e.name for e in adopted} == before
    await fleet.run_until_done()
    assert all(j.started_at is not None for j in fleet.jobs.values())
    assert fleet.machines_on("a") == fleet.machines_on("b") == []


async def test_a_restart_while_a_provider_does_not_answer_keeps_the_scale_set_within_max_runners(
    tmp_path: Path,
) -> None:
    # Without the runner table recalled from the state database this fails: the new engine
    # creates replacements for a's runners, and adopts them too once a lists again.
    cfg = config("  - {name: linux, max_runners: 3, providers: [a, b]}\n", "a b")
    fleet = await started(VirtualFleet(tmp_path, cfg, {"a": Host(), "b": Host()}))
    await fleet.queue("linux", 4, duration=3600)  # three run, one waits
    await fleet.run_for(10)
    on_a = fleet.machines_on("a")
    assert on_a, "spread puts runners on both"
    before = {r.name for r in fleet.engine.runners.live("linux")}
    fleet.providers["a"].fail_lists(count=2)
    await fleet.restart()
    assert not fleet.engine.fleet.is_reachable("a")
    assert {r.name for r in fleet.engine.runners.on("a")} == set(on_a), "a's runners still count"
    text = render_status(snapshot(fleet.engine.ctx))
    kept = len(on_a)
    assert f"  a's {kept} runner{'s' if kept > 1 else ''} still count" in text, text
    assert "against the limits until it answers; written off in 5m unless it does" in text, text
    assert "Not listed yet" in text, "their machines are not known since the restart"
    await fleet.run_for(60)  # a lists again and its runners are adopted
    assert fleet.engine.fleet.is_reachable("a")
    assert {r.name for r in fleet.engine.runners.live("linux")} == before, "none created twice"
    adopted = {e.name for e in fleet.engine.events.recent() if e.action == "adopted"}
    assert adopted == before
    assert "still count" not in render_status(snapshot(fleet.engine.ctx))


async def test_a_create_cut_short_by_a_restart_counts_while_its_provider_does_not_answer(
    tmp_path: Path,
) -> None:
    # Without the creates cut short recalled too this fails: b gets a runner at the restart and
    # a's machine is adopted once a lists again, two runners for max_runners 1.
    cfg = config("  - {name: linux, max_runners: 1, placement: pack, providers: [a, b]}\n", "a b")
    fleet = await started(VirtualFleet(tmp_path, cfg, {"a": Host(), "b": Host()}))
    a = fleet.providers["a"]

    async def made_then_silent(request: CreateRequest) -> Created | Refusal:
        a.create_now(request, fleet.clock.now())
        await asyncio.Event().wait()  # the machine exists; the daemon stops before the answer
        raise AssertionError("never answered")

    a.create = made_then_silent  # type: ignore[method-assign]  # a create the restart cuts short
    await fleet.queue("linux", 1, duration=600)
    (made,) = fleet.machines_on("a")
    del a.create  # the provider's own create again
    a.fail_deletes(count=1)  # as at a kill: the stop leaves the machine
    a.fail_lists(count=2)
    await fleet.restart()
    assert [r.name for r in fleet.engine.runners.live("linux")] == [made]
    assert fleet.machines_on("b") == [], "no runner created in its place"
    await fleet.run_for(60)
    assert [r.name for r in fleet.engine.runners.live("linux")] == [made]
    (adopted,) = [e for e in fleet.engine.events.recent() if e.action == "adopted"]
    assert (adopted.name, adopted.attributes["why"]) == (made, "interrupted_create")
    await fleet.run_until_done()
    assert all(j.runner == made for j in fleet.jobs.values())


async def test_runners_recalled_for_a_provider_that_stays_silent_are_written_off_after_the_grace(
    tmp_path: Path,
) -> None:
    timing = TIMING.replace("left_grace: 0s", "left_grace: 0s, unreachable_grace: 5m")
    cfg = config("  - {name: linux, max_runners: 4, providers: [a, b]}\n", "a b", timing)
    fleet = await started(VirtualFleet(tmp_path, cfg, {"a": Host(), "b": Host()}))
    await fleet.queue("linux", 2, duration=3600)
    await fleet.run_for(10)
    on_a = fleet.machines_on("a")
    assert on_a, "spread puts one on each"
    fleet.providers["a"].fail_lists(always=True)
    await fleet.restart()
    await fleet.run_for(270)
    assert {r.name for r in fleet.engine.runners.on("a")} == set(on_a), "kept within the grace"
    states = {r["name"]: r["state"] for r in snapshot(fleet.engine.ctx)["runners"]}
    assert {states[name] for name in on_a} == {"busy"}, "GitHub tells what they do meanwhile"
    await fleet.run_for(90)
    assert fleet.engine.runners.on("a") == [], "written off after unreachable_grace"
    assert {fleet.removals()[name] for name in on_a} == {"unreachable"}


# ---------------------------------------------------------------------- unreachable, start timeout


async def test_runners_of_an_unreachable_provider_are_kept_through_the_grace_then_written_off(
    tmp_path: Path,
) -> None:
    timing = TIMING.replace("left_grace: 0s", "left_grace: 0s, unreachable_grace: 5m")
    cfg = config("  - {name: linux, max_runners: 4, providers: [a, b]}\n", "a b", timing)
    fleet = await started(VirtualFleet(tmp_path, cfg, {"a": Host(), "b": Host()}))
    await fleet.queue("linux", 2, duration=3600)
    await fleet.run_for(10)
    on_a = fleet.machines_on("a")
    assert on_a, "spread puts one on each"
    fleet.providers["a"].fail_lists(always=True)
    await fleet.run_for(270)
    assert {r.name for r in fleet.engine.runners.on("a")} == set(on_a), "kept within the grace"
    assert fleet.engine.fleet.skip_reason("linux", "a", fleet.clock.now()) == "unreachable"
    await fleet.run_for(90)
    assert fleet.engine.runners.on("a") == [], "written off after unreachable_grace"
    assert {fleet.removals()[name] for name in on_a} == {"unreachable"}
    fleet.providers["a"].heal()
    await fleet.run_for(30)
    assert fleet.engine.fleet.is_reachable("a"), "back once it lists again"


async def test_runners_that_never_connect_are_removed_after_start_timeout_and_back_off(
    tmp_path: Path,
) -> None:
    cfg = config("  - {name: linux, max_runners: 4, start_timeout: 2m, providers: [a]}\n")
    fleet = await started(VirtualFleet(tmp_path, cfg, {"a": Host()}, never_boot=["a"]))
    await fleet.queue("linux", 1, duration=60)
    await fleet.run_for(100)
    (record,) = fleet.engine.runners.live("linux")
    await fleet.run_for(60)
    assert fleet.removals()[record.name] == "never_connected"
    assert fleet.github.runners == {} or all(
        r.name != record.name for r in fleet.github.runners.values()
    ), "its registration is removed"
    # The first failure is counted, not backed off: the job's next runner goes there too.
    assert fleet.engine.fleet.skip_reason("linux", "a", fleet.clock.now()) is None
    await fleet.run_for(30)
    (second,) = fleet.engine.runners.live("linux")
    assert second.name != record.name
    for _ in range(300):  # its start_timeout (2m) and a pass, in virtual seconds
        if second.name in fleet.removals():
            break
        await fleet.run_for(1)
    assert fleet.removals()[second.name] == "never_connected"
    reason = fleet.engine.fleet.skip_reason("linux", "a", fleet.clock.now())
    assert reason == "its runners never connect within start_timeout (2 in a row)"


async def test_a_large_runner_refused_by_both_hosts_holds_both_against_lower_priorities(
    tmp_path: Path,
) -> None:
    # Holding one host only (the rule before) fails both assertions.
    sets = HOLD_SETS.replace(
        "providers: [{name: a, runner: {vcpus: 2, memory: 4GiB}}]",
        "providers: [{name: a, runner: {vcpus: 2, memory: 4GiB}}, "
        "{name: b, runner: {vcpus: 2, memory: 4GiB}}]",
    ).replace(
        "providers: [{name: a, runner: {vcpus: 8, memory: 16GiB}}]",
        "providers: [{name: a, runner: {vcpus: 8, memory: 16GiB}}, "
        "{name: b, runner: {vcpus: 8, memory: 16GiB}}]",
    )
    hosts = {"a": Host(vcpus=16, memory_gib=32), "b": Host(vcpus=16, memory_gib=32)}
    fleet = await started(VirtualFleet(tmp_path, config(sets, "a b"), hosts))
    await fleet.queue("small", 16, duration=600)  # both hosts full: 8 x 4 GiB each
    await fleet.run_for(10)
    await fleet.queue("large", 1, duration=300)
    await fleet.run_for(1)
    now = fleet.clock.now()
    held = [p for p in ("a", "b") if fleet.engine.fleet.hold_on(p, now) is not None]
    assert held == ["a", "b"]
    assert fleet.engine.fleet.skip_reason("small", "b", now) == "held for scale set large"


async def test_a_machine_that_stops_before_its_job_ends_its_runner_and_a_new_one_takes_the_job(
    tmp_path: Path,
) -> None:
    cfg = config("  - {name: linux, max_runners: 4, providers: [a]}\n")
    fleet = await started(VirtualFleet(tmp_path, cfg, {"a": Host()}, never_boot=["a"]))
    (job,) = await fleet.queue("linux", 1, duration=60)
    (record,) = fleet.engine.runners.live("linux")
    fleet.providers["a"].set_state(record.name, MachineState.STOPPED)  # it died while booting
    fleet.never_boot.clear()
    await fleet.run_for(30)
    assert fleet.removals()[record.name] == "ended"
    await fleet.run_until_done()
    assert job.runner != record.name, "a replacement ran the job"
