"""Scaling in the engine on a fake clock: schedule windows, the idle reserve that yields to real
work, and crash-loop backoff. Fake GitHub, fake providers and a real SQLite store, driven step by
step (demand, drain the creates, reconcile) so every assertion is exact."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from rungar.cli.scale_sets import inspect_lines
from rungar.cli.status import render_status
from rungar.config.model import (
    Placement,
    ProviderConfig,
    ScaleSetConfig,
    ScaleSetProvider,
    ScaleSetsFile,
    Schedule,
    ScheduleWindow,
    Timing,
)
from rungar.daemon.control import Control
from rungar.daemon.status import snapshot
from rungar.engine.engine import Engine
from rungar.engine.report.events import EventLog
from rungar.model.machine import Conclusion, MachineState
from rungar.store.sqlite import SqliteStore
from rungar.testing.clock import FakeClock
from rungar.testing.fake_github import FakeGitHub
from rungar.testing.fake_provider import GIB, FakeProvider

RUNNER = {"vcpus": 2, "memory": "4GiB"}
TUESDAY_0900 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC).timestamp()
OFFICE = Schedule(
    "UTC", (ScheduleWindow(frozenset(range(5)), 8 * 60, 18 * 60, 3, "mon-fri 08:00-18:00"),)
)


def scale_set(name: str, **kw: object) -> ScaleSetConfig:
    defaults: dict[str, object] = {
        "max_runners": 10,
        "placement": Placement.PACK,
        "providers": (ScaleSetProvider("compute1", RUNNER),),
        "start_timeout": 60,
    }
    defaults.update(kw)
    return ScaleSetConfig(name, **defaults)  # type: ignore[arg-type]  # keyword table above


class World:
    def __init__(self, tmp_path: Path, *scale_sets: ScaleSetConfig, vcpus: int = 8) -> None:
        self.tmp_path = tmp_path
        self.clock = FakeClock(TUESDAY_0900)
        self.github = FakeGitHub()
        self.providers = {
            "compute1": FakeProvider(
                "compute1", vcpus=vcpus, memory_bytes=4 * vcpus * GIB, clock=self.clock
            )
        }
        self.cfg = ScaleSetsFile(
            (ProviderConfig("compute1", "fake", runner=RUNNER),),
            scale_sets,
            Timing(reconcile_interval=30, left_grace=0),
        )
        self.engine = self.new_engine()

    def new_engine(self) -> Engine:
        return Engine(
            self.cfg,
            self.providers,
            self.github,
            clock=self.clock,
            store=SqliteStore(self.tmp_path / "state.db", now=self.clock.now),
            events=EventLog(self.clock, self.tmp_path / "events.jsonl"),
            installation="gh-test",
        )

    async def start(self) -> None:
        for state in self.engine.sets.values():
            state.id = await self.github.ensure_scale_set(state.config)

    async def demand(self, name: str, assigned: int) -> None:
        self.engine.on_demand(name, assigned)
        await self.engine.drain_tasks()

    async def connect_all(self) -> None:
        """Every runner comes online on GitHub, idle; a reconcile pass sees it."""
        for record in list(self.engine.runners):
            self.github.start_runner(record.name, busy=False)
        await self.engine.reconcile()
        await self.engine.drain_tasks()

    def runners_of(self, name: str) -> int:
        return len(self.engine.runners.live(name))


async def test_a_schedule_window_raises_the_reserve_while_open_and_lowers_it_after(
    tmp_path: Path,
) -> None:
    world = World(tmp_path, scale_set("office", min_runners=1, schedule=OFFICE))
    await world.start()
    await world.demand("office", 0)
    assert world.runners_of("office") == 3, "08:00-18:00 on a Tuesday: min_runners 3"
    await world.connect_all()
    world.clock.set(datetime(2026, 12, 1, 18, 0, tzinfo=UTC).timestamp())
    await world.demand("office", 0)
    assert world.runners_of("office") == 1, "after 18:00 the scale set's own min_runners"
    changes = [e for e in world.engine.events.recent() if e.action == "min_runners_changed"]
    assert [(e.attributes["from"], e.attributes["to"]) for e in changes] == [(3, 1)]


async def test_status_and_inspect_show_the_window_in_force_and_the_next_change(
    tmp_path: Path,
) -> None:
    world = World(tmp_path, scale_set("office", min_runners=1, schedule=OFFICE))
    await world.start()
    await world.demand("office", 2)
    document = snapshot(world.engine.ctx)
    (entry,) = document["scale_sets"]
    assert entry["schedule"]["window"] == "mon-fri 08:00-18:00"
    assert entry["schedule"]["next_change"] == datetime(2026, 12, 1, 18, tzinfo=UTC).timestamp()
    assert (entry["desired"], entry["reserve"], entry["min"]) == (5, 3, 3)
    text = render_status(document)
    assert (
        "office: window mon-fri 08:00-18:00 (UTC) in force, min_runners 3; "
        "Tue 18:00 (in 9h): min_runners 1, outside every window"
    ) in text
    assert "5 (3 reserve)" in text
    found = Control.of(world.engine).inspect_scale_set("office")
    lines = "\n".join(inspect_lines(found))
    assert "Schedule:" in lines and "Tue 18:00 (in 9h)" in lines


async def stop_before_connecting(world: World, name: str, output: str = "") -> str:
    """One runner of ``name`` is created and its machine stops before it ever connects,
    printing two lines starting with ``output`` when given."""
    await world.demand(name, 1)
    (record,) = world.engine.runners.live(name)
    if output:
        lines = ["boot", f"{output}: starting", f"{output}: Error: bad token"]
        world.providers["compute1"].output[record.name] = lines
    world.providers["compute1"].set_state(record.name, MachineState.STOPPED)
    await world.engine.reconcile()
    await world.engine.drain_tasks()
    return record.name


async def test_runners_that_exit_before_connecting_back_their_provider_off(
    tmp_path: Path,
) -> None:
    world = World(tmp_path, scale_set("rungar-c4-m8"))
    await world.start()
    output = world.providers["compute1"].output
    for n in range(3):
        crashed = await stop_before_connecting(world, "rungar-c4-m8", output=f"try {n}")
        names = {r.name for r in world.github.runners.values()}
        assert crashed not in names, "the registration of a runner that crashed is removed"
        if n == 0:
            assert snapshot(world.engine.ctx)["skips"] == [], "one failure is not a loop"
        if n == 1:
            world.clock.advance(30)  # the wait is over: the next runner is tried
    assert output, "the provider was asked"
    document = snapshot(world.engine.ctx)
    text = render_status(document)
    assert (
        "rungar-c4-m8's runners on compute1 exit before connecting (3 in a row); next try in 1m"
    ) in text
    shown = "\n    | ".join(["boot", "try 2: starting", "try 2: Error: bad token"])
    assert f"{crashed}'s last output:\n    | {shown}\n" in text
    (skip,) = document["skips"]
    assert skip["output"] == ["boot", "try 2: starting", "try 2: Error: bad token"]
    world.engine.on_demand("rungar-c4-m8", 1)
    await world.engine.drain_tasks()
    assert world.runners_of("rungar-c4-m8") == 0, "nothing is created during the wait"
    events = [e for e in world.engine.events.recent() if e.action == "crash_loop"]
    assert [e.attributes["runners"] for e in events] == [2, 3], "the first is no loop yet"
    assert events[-1].attributes["output"] == ["boot", "try 2: starting", "try 2: Error: bad token"]
    crashed_total = world.engine.metrics.crashed.labels("rungar-c4-m8", "compute1", "exited")
    assert crashed_total._value.get() == 3  # prometheus_client has no getter


async def test_a_runner_that_connects_forgives_the_crash_loop(tmp_path: Path) -> None:
    world = World(tmp_path, scale_set("rungar-c4-m8"))
    await world.start()
    await stop_before_connecting(world, "rungar-c4-m8")
    assert world.engine.fleet.crash_loop("rungar-c4-m8", "compute1") is not None
    world.clock.advance(30)
    await world.demand("rungar-c4-m8", 1)
    await world.connect_all()
    assert world.engine.fleet.crash_loop("rungar-c4-m8", "compute1") is None
    assert snapshot(world.engine.ctx)["skips"] == []


async def test_a_runner_that_never_connects_within_start_timeout_counts_too(
    tmp_path: Path,
) -> None:
    world = World(tmp_path, scale_set("rungar-c4-m8", start_timeout=60))
    await world.start()
    for _ in range(2):
        await world.demand("rungar-c4-m8", 1)
        (record,) = world.engine.runners.live("rungar-c4-m8")
        world.clock.advance(61)
        await world.engine.reconcile()
        await world.engine.drain_tasks()
        assert record.removal_reason == "never_connected"
        world.engine.on_demand("rungar-c4-m8", 0)
        await world.engine.drain_tasks()
    reason = world.engine.fleet.skip_reason("rungar-c4-m8", "compute1", world.clock.now())
    assert reason == "its runners never connect within start_timeout (2 in a row)"
    assert world.github.runners == {}, "its registration is removed"


async def test_a_crash_loop_survives_a_restart(tmp_path: Path) -> None:
    world = World(tmp_path, scale_set("rungar-c4-m8"))
    await world.start()
    await stop_before_connecting(world, "rungar-c4-m8")
    await stop_before_connecting(world, "rungar-c4-m8")
    world.engine = world.new_engine()
    reason = world.engine.fleet.skip_reason("rungar-c4-m8", "compute1", world.clock.now() + 1)
    assert reason == "its runners exit before connecting (2 in a row)"


async def test_a_higher_priority_reserve_refill_never_starves_lower_priority_jobs(
    tmp_path: Path,
) -> None:
    """Real work before reserves, on one full provider with room for two:
    "high" keeps a reserve of 2 and "low" has a job assigned; when room opens, low's job gets
    it, not high's reserve refill."""
    world = World(
        tmp_path,
        scale_set("high", min_runners=2, priority=10),
        scale_set("low", priority=0),
        vcpus=4,  # two runners of 2 vCPUs
    )
    await world.start()
    await world.demand("high", 0)
    await world.connect_all()
    assert world.runners_of("high") == 2, "the reserve fills the provider"
    # A job of high's takes one idle runner; high wants a third runner to refill its reserve.
    first = world.engine.runners.live("high")[0]
    world.github.start_runner(first.name, busy=True)
    await world.demand("high", 1)
    assert world.engine.sets["high"].reserve == 2
    assert world.engine.fleet.hold_on("compute1", world.clock.now()) is None, (
        "a reserve refill that finds the provider full holds no one off"
    )
    # low's job arrives: the provider is full, so it waits for room there.
    await world.demand("low", 1)
    assert world.runners_of("low") == 0
    # high's job ends: its runner goes and its machine is deleted, which makes room.
    world.engine.on_job_completed("high", "job-1", first.name, Conclusion.SUCCEEDED)
    await world.engine.drain_tasks()
    world.engine.on_demand("high", 0)
    await world.engine.drain_tasks()
    world.clock.advance(20)  # every refusal backoff (15 s) is over; waits last 60 s
    await world.engine.reconcile()
    await world.engine.drain_tasks()
    assert world.runners_of("low") == 1, "low's assigned job took the room"
    assert world.runners_of("high") == 1, "high's reserve waits for the next room"
    desired = {
        s["name"]: (s["desired"], s["reserve"]) for s in snapshot(world.engine.ctx)["scale_sets"]
    }
    assert desired == {"high": (2, 2), "low": (1, 0)}


async def test_status_says_how_old_githubs_numbers_are(tmp_path: Path) -> None:
    world = World(tmp_path, scale_set("rungar-c4-m8"), scale_set("rungar-gpu"))
    await world.start()
    text = render_status(snapshot(world.engine.ctx))
    assert "Queue age:     no word from GitHub yet (rungar-c4-m8, rungar-gpu)" in text
    await world.demand("rungar-c4-m8", 0)
    world.clock.advance(30)
    await world.demand("rungar-gpu", 0)
    world.clock.advance(12)
    document = snapshot(world.engine.ctx)
    now = world.clock.now()
    assert [now - s["polled_at"] for s in document["scale_sets"]] == [42, 12]
    assert "Queue age:     GitHub's numbers 42s old (rungar-c4-m8)" in render_status(document)
    found = Control.of(world.engine).inspect_scale_set("rungar-gpu")
    assert "Queue age:     GitHub's numbers 12s old" in "\n".join(inspect_lines(found))


async def test_a_corrupt_state_database_is_moved_aside_and_the_fleet_adopted_again(
    tmp_path: Path,
) -> None:
    world = World(tmp_path, scale_set("rungar-c4-m8"))
    await world.start()
    await world.demand("rungar-c4-m8", 2)
    names = sorted(r.name for r in world.engine.runners)
    world.engine.store.close()
    garbage = b"this is not a database" * 100
    (tmp_path / "state.db").write_bytes(garbage)
    world.engine = world.new_engine()  # does not stop: moves it aside and starts afresh
    kept = world.engine.store.moved_aside
    assert kept is not None and kept.name == "state.db.corrupt-20261201T090000Z"
    assert kept.read_bytes() == garbage, "the corrupt file is kept as it was"
    await world.start()
    await world.engine.reconcile()
    assert sorted(r.name for r in world.engine.runners) == names, "adopted from their labels"
    assert all(r.scale_set == "rungar-c4-m8" for r in world.engine.runners)
    text = render_status(snapshot(world.engine.ctx))
    assert f"State:         was corrupt; kept as {kept}, started afresh" in text


def test_a_second_corruption_never_overwrites_the_first_copy(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    for n in range(2):
        path.write_bytes(b"garbage %d" % n * 50)
        SqliteStore(path, now=lambda: TUESDAY_0900).close()
    kept = sorted(p.name for p in tmp_path.glob("state.db.corrupt-*"))
    assert kept == ["state.db.corrupt-20261201T090000Z", "state.db.corrupt-20261201T090000Z-2"]
    assert (tmp_path / kept[0]).read_bytes() == b"garbage 0" * 50


async def test_a_min_runners_change_on_a_scale_set_without_a_schedule_says_it_was_configured(
    tmp_path: Path,
) -> None:
    world = World(tmp_path, scale_set("plain", min_runners=1))
    await world.start()
    await world.demand("plain", 0)
    state = world.engine.sets["plain"]
    state.config = replace(state.config, min_runners=2)  # as an apply of the file does
    await world.demand("plain", 0)
    (change,) = [e for e in world.engine.events.recent() if e.action == "min_runners_changed"]
    assert change.message == "min_runners 1 -> 2 (as configured)"


async def test_a_runner_created_after_its_block_changes_carries_the_new_revision(
    tmp_path: Path,
) -> None:
    world = World(tmp_path, scale_set("plain"))
    await world.start()
    await world.demand("plain", 1)
    (first,) = world.engine.runners.live("plain")
    state = world.engine.sets["plain"]
    bigger = {"vcpus": 4, "memory": "8GiB"}
    # as an apply of the file does: a new configuration with a new runner block
    state.config = replace(state.config, providers=(ScaleSetProvider("compute1", bigger),))
    await world.demand("plain", 2)
    second = next(r for r in world.engine.runners.live("plain") if r.name != first.name)
    assert second.revision == world.engine.current_revisions("plain")["compute1"]
    assert second.revision != first.revision
    assert world.providers["compute1"].used()[0] == 2 + 4  # the second machine's new size


async def test_a_runner_github_refused_as_outdated_is_no_crash_and_its_provider_is_skipped(
    tmp_path: Path,
) -> None:
    world = World(tmp_path, scale_set("rungar-c4-m8"))
    await world.start()
    await stop_before_connecting(world, "rungar-c4-m8", output="try 0")  # a crash first
    world.clock.advance(30)
    await world.demand("rungar-c4-m8", 1)
    (record,) = world.engine.runners.live("rungar-c4-m8")
    world.providers["compute1"].output[record.name] = [
        "Current runner version: '2.320.0'",
        "An error occurred: Runner version v2.320.0 is deprecated and cannot receive messages.",
        "Runner listener exit with terminated error, stop the service, no retry needed.",
    ]
    world.providers["compute1"].set_state(record.name, MachineState.STOPPED)
    await world.engine.reconcile()
    await world.engine.drain_tasks()

    loop = world.engine.fleet.crash_loop("rungar-c4-m8", "compute1")
    assert loop is not None and loop.refusals == 1, "the crash before still counts, alone"
    crashed = world.engine.metrics.crashed.labels("rungar-c4-m8", "compute1", "exited")
    assert crashed._value.get() == 1  # prometheus_client has no getter
    outdated = world.engine.metrics.outdated.labels("rungar-c4-m8", "compute1")
    assert outdated._value.get() == 1
    (event,) = [e for e in world.engine.events.recent() if e.action == "outdated"]
    assert event.attributes["runner_version"] == "2.320.0"
    assert "GitHub refused runner 2.320.0 as outdated (not a crash)" in event.message
    assert not [e for e in world.engine.events.recent() if e.action == "crash_loop"]
    why = world.engine.fleet.cannot_place("rungar-c4-m8", world.clock.now())
    assert "compute1: runner 2.320.0 was refused by GitHub as outdated" in why, why
