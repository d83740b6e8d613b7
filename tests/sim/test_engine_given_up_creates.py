"""A create given up on during a partition, whose Create reaches the provider once the link heals,
on a real engine (fake GitHub, a real SQLite store, a hand-wound clock): the machine it makes is
deleted as left behind, never adopted, whether it appears at once or a pass later, and across a
restart; a listing asked for before the give-up does not settle it (docs/architecture.md,
"Creates given up on")."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

import pytest

from rungar.config.model import (
    ProviderConfig,
    ScaleSetConfig,
    ScaleSetProvider,
    ScaleSetsFile,
    Timing,
)
from rungar.engine.engine import Engine
from rungar.engine.report.events import EventLog
from rungar.errors import ProviderUnavailable
from rungar.model.create_intent import CreateIntent
from rungar.model.machine import Created, CreateRequest, Machine, Refusal, Removal
from rungar.model.runner import RemovalReason
from rungar.store.sqlite import SqliteStore
from rungar.testing.clock import FakeClock
from rungar.testing.fake_github import FakeGitHub
from rungar.testing.fake_provider import FakeProvider
from tests.waiting import until

RUNNER = {"vcpus": 1, "memory": "1GiB"}
START_TIMEOUT = 30.0
LEFT_GRACE = 60.0


class PartitionedProvider(FakeProvider):
    """A provider behind a link that can be cut: while it is, a Create is held on the way (it
    reaches the provider, and makes its machine, once the link heals), and every other call
    gets no answer. ``list_gate``, when set, holds a List until it is opened."""

    def __init__(self, name: str, clock: FakeClock) -> None:
        super().__init__(name, clock=clock)
        self.cut = False
        self.held: list[CreateRequest] = []
        self.list_gate: asyncio.Event | None = None

    def heal(self) -> None:
        """The link heals: every held Create reaches the provider, in order."""
        self.cut = False
        for request in self.held:
            self.create_now(request, self._clock.now())
        self.held.clear()

    async def create(self, request: CreateRequest) -> Created | Refusal:
        if self.cut:
            self.held.append(request)
            await asyncio.Event().wait()  # the daemon's own timeout ends the wait
        return await super().create(request)

    async def delete(self, name: str, removal: Removal | None = None) -> None:
        if self.cut:
            raise ProviderUnavailable(f"{self.name}: no answer to delete (partitioned)")
        await super().delete(name, removal)

    async def list(self, selector: Mapping[str, str]) -> list[Machine]:
        if self.list_gate is not None:
            await self.list_gate.wait()
        if self.cut:
            raise ProviderUnavailable(f"{self.name}: no answer to list (partitioned)")
        return await super().list(selector)


class World:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.clock = FakeClock()
        self.github = FakeGitHub()
        self.host = PartitionedProvider("host1", self.clock)
        scale_set = ScaleSetConfig(
            "ci",
            max_runners=2,
            providers=(ScaleSetProvider("host1", RUNNER),),
            start_timeout=START_TIMEOUT,
        )
        self.cfg = ScaleSetsFile(
            (ProviderConfig("host1", "fake", runner=RUNNER),),
            (scale_set,),
            Timing(reconcile_interval=30, left_grace=LEFT_GRACE),
        )
        self.engine = self.start_engine()

    def start_engine(self) -> Engine:
        return Engine(
            self.cfg,
            {"host1": self.host},
            self.github,
            clock=self.clock,
            store=SqliteStore(self.tmp_path / "state.db"),
            events=EventLog(self.clock, self.tmp_path / "events.jsonl"),
            installation="gh-test",
        )

    async def restart(self) -> None:
        self.engine.store.close()
        self.engine = self.start_engine()
        await self.register_scale_sets()

    async def register_scale_sets(self) -> None:
        for state in self.engine.sets.values():
            state.id = await self.github.ensure_scale_set(state.config)

    async def give_up_in_a_partition(self) -> str:
        """One create sent while the link is cut, given up on at its start_timeout."""
        self.host.cut = True
        self.engine.on_demand("ci", 1)
        creates = asyncio.create_task(self.engine.drain_tasks())
        await until(lambda: self.host.held, "the Create held in the partition")
        self.engine.on_demand("ci", 0)  # the job went elsewhere: no create is asked again
        while not creates.done():
            await self.clock.run_for(1)  # the Create's start_timeout, on the engine's clock
        await creates
        (request,) = self.host.held
        name = request.runner_name
        assert not self.engine.runners.names(), "not placed"
        assert [g.runner for g in self.engine.store.given_up()] == [name]
        assert not self.engine.store.intents(), "settled as given up, not as a create cut short"
        return name

    async def reconcile(self) -> None:
        await self.engine.reconcile()
        await self.engine.drain_tasks()

    def actions(self, name: str) -> list[str]:
        return [e.action for e in self.engine.events.recent() if e.name == name]


@pytest.fixture
async def world(tmp_path: Path) -> World:
    w = World(tmp_path)
    await w.register_scale_sets()
    return w


async def test_a_late_machine_of_a_create_given_up_in_a_partition_is_deleted_not_adopted(
    world: World,
) -> None:
    name = await world.give_up_in_a_partition()
    await world.reconcile()  # in the partition: the provider does not answer
    await world.clock.run_for(90)  # a long partition: past left_grace
    world.host.heal()  # the held Create reaches the provider: its machine is made
    assert name in {m.name for m in world.host.machines}
    await world.reconcile()
    assert name not in world.engine.runners, "never adopted"
    assert name not in {m.name for m in world.host.machines}, "deleted on its provider"
    assert world.host.removals[name].reason is RemovalReason.NOT_PLACED
    assert world.actions(name) == ["left_behind"]
    assert not any(r.name == name for r in world.github.runners.values()), "never registered"
    await world.clock.run_for(30)
    await world.reconcile()  # a later listing shows it gone: the name is settled
    assert world.engine.store.given_up() == []
    assert world.actions(name) == ["left_behind"]


async def test_a_machine_that_appears_a_pass_after_the_link_heals_is_deleted_not_adopted(
    world: World,
) -> None:
    name = await world.give_up_in_a_partition()
    await world.clock.run_for(90)
    world.host.cut = False  # the link heals, and the first listing comes before the Create
    await world.reconcile()
    assert [g.listed_at for g in world.engine.store.given_up()] == [world.clock.now()]
    await world.clock.run_for(30)
    world.host.heal()  # ...which makes its machine a pass later, within left_grace
    await world.reconcile()
    assert name not in world.engine.runners and world.actions(name) == ["left_behind"]
    assert name not in {m.name for m in world.host.machines}


async def test_a_create_given_up_on_is_kept_across_a_restart(world: World) -> None:
    name = await world.give_up_in_a_partition()
    await world.restart()
    assert name not in world.engine.runners, "not recalled as a runner"
    world.host.heal()
    await world.reconcile()
    assert name not in world.engine.runners and world.actions(name) == ["left_behind"]
    assert name not in {m.name for m in world.host.machines}


async def test_an_intent_a_crash_left_beside_a_create_given_up_on_is_not_recalled_or_adopted(
    world: World,
) -> None:
    name = await world.give_up_in_a_partition()
    # A crash between keeping the name as given up on and clearing its intent.
    world.engine.store.write_intent(CreateIntent(name, "ci", "req", runner_id=0, provider="host1"))
    await world.restart()
    assert name not in world.engine.runners, "not recalled as a runner"
    world.host.heal()
    await world.reconcile()
    assert name not in world.engine.runners and world.actions(name) == ["left_behind"]
    assert world.engine.store.intents() == [], "its intent cleared"


async def test_a_listing_asked_for_before_the_give_up_does_not_settle_it(world: World) -> None:
    gate = world.host.list_gate = asyncio.Event()
    world.host.cut = True
    world.engine.on_demand("ci", 1)
    creates = asyncio.create_task(world.engine.drain_tasks())
    await until(lambda: world.host.held, "the Create held in the partition")
    world.engine.on_demand("ci", 0)
    reconcile = asyncio.create_task(world.engine.reconcile())  # its List is asked now
    while not creates.done():
        await world.clock.run_for(1)
    (name,) = [g.runner for g in world.engine.store.given_up()]
    world.host.cut = False  # that listing is answered, without the machine
    gate.set()
    await reconcile
    (kept,) = world.engine.store.given_up()
    assert kept.listed_at == 0.0, "a listing older than the give-up says nothing of it"
    world.host.list_gate = None
    world.host.heal()
    await world.reconcile()
    assert name not in world.engine.runners and world.actions(name) == ["left_behind"]
