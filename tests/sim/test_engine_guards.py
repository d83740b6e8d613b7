"""The engine's guards tested one at a time, each on a real engine (fake GitHub, fake providers,
a real SQLite store, a hand-wound clock): every test fails when the one guard it names is
removed, and first shows the path it guards is taken.

tools/guard_mutants.py removes each guard in a copy of the tree and checks its test here fails
(``make test-long``). Guards that are pure decisions are tested in tests/unit/test_guards.py.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rungar.config.model import (
    Placement,
    ProviderConfig,
    ScaleSetConfig,
    ScaleSetProvider,
    ScaleSetsFile,
    Timing,
)
from rungar.daemon.control import Control
from rungar.daemon.runloop import RunLoop
from rungar.engine.core.records import RunnerRecord
from rungar.engine.create.rooms import Rooms
from rungar.engine.engine import Engine
from rungar.engine.report.events import EventLog
from rungar.errors import GitHubError
from rungar.github.interface import Budget
from rungar.model.machine import JobHint, RefusalKind
from rungar.model.runner import RunnerState
from rungar.placement import RoomOpened
from rungar.store.sqlite import SqliteStore
from rungar.testing.clock import FakeClock
from rungar.testing.fake_github import FakeGitHub
from rungar.testing.fake_provider import GIB, FakeProvider
from tests.waiting import until

RUNNER = {"vcpus": 2, "memory": "4GiB"}
HINT = JobHint(job="build", repository="octo/app")


class World:
    """One scale set, ``linux``, on ``dear`` (priced) and ``cheap`` (free, room for one)."""

    def __init__(self, tmp_path: Path, github: FakeGitHub | None = None) -> None:
        self.clock = FakeClock()
        self.github = github or FakeGitHub()
        self.providers: dict[str, FakeProvider] = {
            "dear": FakeProvider("dear", vcpus=8, memory_bytes=16 * GIB, clock=self.clock),
            "cheap": FakeProvider("cheap", vcpus=2, memory_bytes=4 * GIB, clock=self.clock),
        }
        scale_set = ScaleSetConfig(
            "linux",
            max_runners=4,
            placement=Placement.PACK,
            providers=(ScaleSetProvider("dear", RUNNER), ScaleSetProvider("cheap", RUNNER)),
            start_timeout=60,
        )
        self.cfg = ScaleSetsFile(
            (
                ProviderConfig("dear", "fake", runner=RUNNER, price_per_hour=1.0),
                ProviderConfig("cheap", "fake", runner=RUNNER),
            ),
            (scale_set,),
            Timing(reconcile_interval=30, left_grace=0),
        )
        self.engine = Engine(
            self.cfg,
            self.providers,
            self.github,
            clock=self.clock,
            store=SqliteStore(tmp_path / "state.db"),
            events=EventLog(self.clock, tmp_path / "events.jsonl"),
            installation="gh-test",
        )

    async def start(self) -> None:
        for state in self.engine.sets.values():
            state.id = await self.github.ensure_scale_set(state.config)

    async def idle_runners(self, count: int) -> list[RunnerRecord]:
        """``count`` runners on ``dear``, online on GitHub and idle, as a pass has seen them."""
        self.engine.on_demand("linux", count)
        await self.engine.drain_tasks()
        for record in self.engine.runners:
            self.github.start_runner(record.name, busy=False)
        await self.engine.reconcile()
        await self.engine.drain_tasks()
        records = sorted(self.engine.runners, key=lambda r: r.name)
        assert [(r.provider, r.state) for r in records] == [("dear", RunnerState.IDLE)] * count
        return records

    def kept(self, record: RunnerRecord) -> bool:
        machines = {m.name for m in self.providers[record.provider].machines}
        return (
            self.engine.runners.get(record.name) is record
            and record.state is not RunnerState.LEAVING
            and record.name in machines
        )

    async def remove_by_hand(self, record: RunnerRecord) -> dict[str, object]:
        (result,) = await Control.of(self.engine).remove_runners([record.name])
        await self.engine.drain_tasks()
        return result

    def asked_github_to_remove(self, record: RunnerRecord) -> bool:
        return ("remove_runner", record.runner_id) in self.github.calls


@pytest.fixture
async def world(tmp_path: Path) -> World:
    w = World(tmp_path)
    await w.start()
    return w


# Never remove a busy runner: the removal (GitHub's answer, the record's flag), the replacement.


async def test_a_runner_github_refuses_to_remove_as_busy_is_kept(world: World) -> None:
    idle, taken = await world.idle_runners(2)
    assert (await world.remove_by_hand(idle))["ok"] and not world.kept(idle)
    world.github.start_runner(taken.name, busy=True)  # a job started; no pass has seen it
    result = await world.remove_by_hand(taken)
    assert world.asked_github_to_remove(taken)
    assert not result["ok"] and "busy with a job" in str(result["message"])
    assert world.kept(taken) and taken.state is RunnerState.BUSY


async def test_a_runner_its_record_calls_busy_is_kept_without_asking_github(
    world: World,
) -> None:
    idle, taken = await world.idle_runners(2)
    assert (await world.remove_by_hand(idle))["ok"] and world.asked_github_to_remove(idle)
    # GitHub's job message says it started; GitHub's runner list does not show it busy yet.
    world.engine.on_job_started("linux", "job-1", taken.name, HINT)
    result = await world.remove_by_hand(taken)
    assert not result["ok"] and world.kept(taken)
    assert not world.asked_github_to_remove(taken)


async def test_a_busy_runner_without_a_registration_is_kept(world: World) -> None:
    idle, taken = await world.idle_runners(2)
    idle.runner_id = taken.runner_id = 0  # adopted before GitHub listed them: no id known
    assert (await world.remove_by_hand(idle))["ok"] and not world.kept(idle)
    world.engine.on_job_started("linux", "job-1", taken.name, HINT)
    result = await world.remove_by_hand(taken)
    assert not result["ok"] and world.kept(taken)


async def replace_on_room(world: World, *, job_meanwhile: bool) -> list[str]:
    """Room opens on ``cheap``: the idle runner on ``dear`` is replaced there, its replacement
    created first; the runner takes a job meanwhile, or not. Returns the runners the
    replacement then asks to remove: the idle one, and never one that took a job."""
    engine = world.engine
    (runner,) = await world.idle_runners(1)
    removed: list[str] = []

    async def create_cheaper(scale_set: str, price: float) -> RunnerRecord | None:
        if job_meanwhile:
            engine.on_job_started("linux", "job-1", runner.name, HINT)
        state = engine.sets[scale_set]
        return await engine.creations.create_runner(state, reserve=True, cheaper_than=price)

    async def remove(record: RunnerRecord) -> None:
        removed.append(record.name)

    async def scale(name: str) -> None:
        """Scaling is not what this test watches: the room's replacement is."""

    rooms = Rooms(engine.ctx, scale=scale, create_cheaper=create_cheaper, remove=remove)
    rooms.opened(RoomOpened("cheap", world.clock.now()))
    await engine.drain_tasks()
    assert len(world.providers["cheap"].machines) == 1, "its replacement was created"
    return removed


async def test_a_runner_that_takes_a_job_while_its_replacement_starts_is_kept(
    tmp_path: Path,
) -> None:
    worlds = []
    for name in ("idle", "taken"):
        (tmp_path / name).mkdir()
        worlds.append(World(tmp_path / name))
        await worlds[-1].start()
    idle, taken = worlds
    removed = await replace_on_room(idle, job_meanwhile=False)
    assert removed == [r.name for r in idle.engine.runners if r.provider == "dear"]
    assert await replace_on_room(taken, job_meanwhile=True) == []


# Creates: a stranded one is kept as given up on; one left unsettled is not deleted.


async def test_a_create_stranded_on_a_provider_is_kept_as_given_up_on_there(world: World) -> None:
    dear = world.providers["dear"]
    cheap = world.providers["cheap"]
    cheap.refuse(RefusalKind.FULL, always=True)
    dear.refuse(RefusalKind.FAILED, leave_machine=True)  # made, failed to start: left behind
    dear.fail_deletes()  # and its delete fails
    world.engine.on_demand("linux", 1)
    await world.engine.drain_tasks()
    assert not world.engine.runners.names(), "not placed"
    (left,) = [m.name for m in dear.machines]
    given_up = world.engine.store.given_up()
    assert [(g.runner, g.provider) for g in given_up] == [(left, "dear")]
    assert world.engine.store.intents() == [], "given up on: not a create cut short"
    await world.engine.reconcile()
    assert left not in world.engine.runners, "never adopted"
    assert left not in {m.name for m in dear.machines}, "deleted as left behind"


async def test_a_create_left_unsettled_is_not_deleted(world: World) -> None:
    dear = world.providers["dear"]
    world.providers["cheap"].refuse(RefusalKind.FULL, always=True)
    # No answer to the Create (the machine is made, the answer lost) nor to the two asks
    # that settle it: whether a machine exists is not known, so nothing is deleted now.
    dear.unanswered(count=3, after_create=True)
    world.engine.on_demand("linux", 1)
    creates = asyncio.create_task(world.engine.drain_tasks())
    while not creates.done():
        await world.clock.run_for(1)  # the settling asks wait on the clock
    await creates
    assert not world.engine.runners.names(), "not placed"
    assert dear.calls["create"] == 3 and dear.calls["delete"] == 0
    (left,) = [m.name for m in dear.machines]
    assert [g.runner for g in world.engine.store.given_up()] == [left], "settled by a listing"


# The listener's retry, slowed while the API budget runs low.


class LowBudgetGitHub(FakeGitHub):
    """GitHub below 10 % of its REST budget, whose scale-set check fails."""

    def budget(self) -> Budget:
        return Budget(remaining=100, limit=5000, stretch=4.0)

    async def ensure_scale_set(self, config: ScaleSetConfig) -> int:
        raise GitHubError("scale set check failed", 502)


async def test_the_listeners_retry_is_stretched_while_the_api_budget_runs_low(
    tmp_path: Path,
) -> None:
    world = World(tmp_path, LowBudgetGitHub())
    first = world.cfg.timing.session_retry_first
    runloop = RunLoop.of(world.engine)
    runloop.start_scale_set("linux")  # its listener alone
    try:
        wake = await until(world.clock.next_wakeup, "the listener waits to retry")
        assert wake == world.clock.now() + first * 4
    finally:
        await runloop.stop()
