"""The engine as its providers see it: scripted gRPC providers, written against the proto alone,
record every call they receive and the deadline it carries, behind the daemon's own provider
clients (``make_provider``) and the engine.

What they check: an unreachable provider gets nothing new until it answers a List; each call
kind's deadline is the one its configuration key names; a pass never waits on an unreachable
provider's deletes and sends the others' at once; a provider that answers again is back in
placement by the next probe, not the next pass.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
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
from rungar.daemon.providers import make_provider
from rungar.daemon.runloop import RunLoop
from rungar.engine.engine import Engine
from rungar.engine.report.events import EventLog
from rungar.model.machine import JobHint
from rungar.model.provider import Provider
from rungar.model.runner import RemovalReason
from rungar.rpc.client import CREATE_DEADLINE_SLACK
from rungar.store.sqlite import SqliteStore
from rungar.testing.clock import FakeClock, JumpingClock
from rungar.testing.fake_github import FakeGitHub
from rungar.testing.scripted_provider import ScriptedProvider
from tests.waiting import WAIT

RUNNER = {"vcpus": 1, "memory": "1GiB"}
TIMING = Timing(
    reconcile_interval=30,
    left_grace=0,
    provider_timeout=3,
    delete_timeout=7,
    probe_interval=2,
)


def scale_set(name: str, providers: list[str], start_timeout: float = 60) -> ScaleSetConfig:
    return ScaleSetConfig(
        name,
        max_runners=10,
        placement=Placement.PACK,
        providers=tuple(ScaleSetProvider(p, RUNNER) for p in providers),
        start_timeout=start_timeout,
    )


class RetriesCostNothing(JumpingClock):
    """Retry delays jump at once; the wait of a Create's start_timeout (30 s or more, which
    these tests never reach) parks until the Create answers and the engine cancels it."""

    async def sleep(self, seconds: float) -> None:
        if seconds >= 30:
            await asyncio.Event().wait()
        await super().sleep(seconds)


class World:
    """Two scripted providers, ``a`` and ``b``, on unix sockets, behind a real engine."""

    def __init__(
        self,
        root: Path,
        scale_sets: list[ScaleSetConfig],
        *,
        timeouts: dict[str, float] | None = None,
        clock: FakeClock | JumpingClock | None = None,
    ) -> None:
        self.root = root
        self.clock = clock or RetriesCostNothing()
        self.github = FakeGitHub()
        self.side = {n: ScriptedProvider(n, f"unix://{root}/{n}.sock") for n in ("a", "b")}
        configs = tuple(
            ProviderConfig(
                n,
                "runnerd",
                runner=RUNNER,
                address=p.address,
                timeout=(timeouts or {}).get(n, 0.0),
            )
            for n, p in self.side.items()
        )
        self.config = ScaleSetsFile(configs, tuple(scale_sets), TIMING)
        self.clients: dict[str, Provider] = {
            c.name: make_provider(c, self.clock, [], "gh-test", TIMING) for c in configs
        }
        self.engine = Engine(
            self.config,
            self.clients,
            self.github,
            clock=self.clock,
            store=SqliteStore(root / "state.db"),
            events=EventLog(self.clock, root / "events.jsonl"),
            installation="gh-test",
        )

    async def start(self) -> None:
        for provider in self.side.values():
            await provider.start()
        for state in self.engine.sets.values():
            state.id = await self.github.ensure_scale_set(state.config)

    async def stop(self) -> None:
        await self.engine.drain_tasks()
        for client in self.clients.values():
            close = getattr(client, "close", None)
            if close is not None:
                await close()
        for provider in self.side.values():
            await provider.stop()
        self.engine.store.close()

    async def demand(self, scale_set: str, assigned: int) -> None:
        self.engine.on_demand(scale_set, assigned)
        await self.engine.drain_tasks()

    def created_on(self, provider: str) -> list[str]:
        return [r.name for r in self.side[provider].calls("Create")]


@pytest.fixture
async def worlds(short_dir: Path) -> AsyncIterator[Callable[..., World]]:
    made: list[World] = []

    def make(*args: object, **kwargs: object) -> World:
        world = World(short_dir, *args, **kwargs)  # type: ignore[arg-type]  # test plumbing
        made.append(world)
        return world

    yield make
    for world in made:
        await world.stop()


async def wait_until(condition: Callable[[], bool], seconds: float = WAIT) -> None:
    """Wait (on the loop, polling) for a real gRPC exchange to have happened."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while not condition():
        if loop.time() > end:
            raise AssertionError("the provider never saw the call")
        await asyncio.sleep(0.02)


# ------------------------------------------------------------------ unreachable until it lists


async def test_a_provider_whose_create_was_settled_gets_nothing_new_until_it_lists_again(
    worlds: Callable[..., World],
) -> None:
    # Broken once (Fleet.record_created clearing the unreachable mark): the second demand's
    # creates went to a, before any List of a was answered.
    world = worlds([scale_set("linux", ["a", "b"])])
    await world.start()
    a = world.side["a"]
    a.script.go_silent("Create", times=1)

    await world.demand("linux", 1)
    first = world.created_on("a")
    assert len(first) == 2 and first[0] == first[1], "unanswered, then settled by asking again"
    assert a.calls("Create")[0].request_id == a.calls("Create")[1].request_id
    assert world.engine.fleet.runners_of("linux", "a") == 1, "the settled runner counts on a"
    assert not world.engine.fleet.is_reachable("a")

    await world.demand("linux", 3)
    assert world.created_on("a") == first, "nothing new for a before it lists again"
    assert len(world.created_on("b")) == 2

    await world.engine.reconcile()  # a answers this pass's List
    assert world.engine.fleet.is_reachable("a")
    await world.demand("linux", 4)
    assert len(world.created_on("a")) == 3, "listed again: back in placement (pack: first)"


# ------------------------------------------------------------------ deadlines


def deadline_of(provider: ScriptedProvider, call: str) -> float:
    received = provider.calls(call)
    assert received, f"{provider.name} received no {call}"
    remaining = received[-1].deadline
    assert remaining is not None, f"{call} to {provider.name} carried no deadline"
    return remaining


def assert_near(seconds: float, expected: float, what: str) -> None:
    # Read when the call arrives: a little less than what was set (gRPC may round it up a bit).
    assert expected - 1.5 < seconds <= expected + 0.25, f"{what}: {seconds:.2f}s, not {expected}s"


async def test_each_call_kind_carries_the_deadline_its_configuration_key_names(
    worlds: Callable[..., World],
) -> None:
    # Broken before: every deadline was 10 s (timing.provider_timeout unread), and b's own
    # timeout of 2 s also bounded its Create.
    world = worlds(
        [scale_set("on-a", ["a"], start_timeout=60), scale_set("on-b", ["b"], start_timeout=45)],
        timeouts={"b": 2.0},
    )
    await world.start()
    a, b = world.side["a"], world.side["b"]
    engine = world.engine

    await engine.reconcile()
    assert_near(deadline_of(a, "List"), 3, "List: timing.provider_timeout")
    assert_near(deadline_of(b, "List"), 2, "List: the provider's own timeout")

    await world.demand("on-a", 1)
    await world.demand("on-b", 1)
    # A Create's deadline is its budget plus a slack: the engine's own timer ends it first.
    slack = CREATE_DEADLINE_SLACK
    assert_near(deadline_of(a, "Create"), 60 + slack, "Create: on-a's start_timeout")
    assert_near(deadline_of(b, "Create"), 45 + slack, "Create: on-b's start_timeout, not b's")

    runner = next(iter(engine.runners.of("on-a")))
    engine.on_job_started("on-a", "job-1", runner.name, JobHint(job="build"))
    await engine.drain_tasks()
    assert_near(deadline_of(a, "UpdateRunner"), 3, "UpdateRunner: timing.provider_timeout")

    for name in ("a", "b"):
        client = engine.providers[name]
        await client.info()
        await client.validate_runner(RUNNER)
    assert_near(deadline_of(a, "Info"), 3, "Info: timing.provider_timeout")
    assert_near(deadline_of(b, "ValidateRunner"), 2, "ValidateRunner: the provider's timeout")

    for record in list(engine.runners):
        await engine.remove(record, RemovalReason.REQUESTED, forced=True)
    assert_near(deadline_of(a, "Delete"), 7, "Delete: timing.delete_timeout")
    assert_near(deadline_of(b, "Delete"), 7, "Delete: timing.delete_timeout, not b's timeout")


async def test_a_timing_change_applied_live_sets_the_next_calls_deadlines(
    worlds: Callable[..., World],
) -> None:
    # Broken before: the clients kept the deadlines they were made with until a restart.
    world = worlds([scale_set("on-a", ["a"])])
    await world.start()
    a = world.side["a"]
    control = Control.of(world.engine)
    text = APPLIED.format(address=a.address)
    answer = await control.apply(text, "scale_sets.yaml", dry_run=False)
    assert answer["applied"], answer["problems"]
    await world.engine.reconcile()
    assert_near(deadline_of(a, "List"), 5, "List: the new timing.provider_timeout")
    await world.demand("on-a", 1)
    for record in list(world.engine.runners):
        await world.engine.remove(record, RemovalReason.REQUESTED, forced=True)
    assert_near(deadline_of(a, "Delete"), 9, "Delete: the new timing.delete_timeout")


APPLIED = """\
timing: {{ provider_timeout: 5s, delete_timeout: 9s, left_grace: 0s }}
providers:
  - {{ name: a, type: runnerd, address: "{address}", runner: {{ vcpus: 1, memory: 1GiB }} }}
  - {{ name: b, type: runnerd, address: "unix:///nowhere/b.sock" }}
scale_sets:
  - {{ name: on-a, max_runners: 10, placement: pack, start_timeout: 60s, providers: [a] }}
"""


# ------------------------------------------------------------------ deletes


async def test_a_pass_sends_no_delete_to_an_unreachable_provider_and_the_rest_at_once(
    worlds: Callable[..., World],
) -> None:
    # Broken before: the pass sent a's deletes anyway, and b's one after another.
    world = worlds([scale_set("on-a", ["a"]), scale_set("on-b", ["b"])])
    await world.start()
    a, b = world.side["a"], world.side["b"]
    engine = world.engine
    await world.demand("on-a", 2)
    await world.demand("on-b", 3)
    ended = {name: set(provider.machines) for name, provider in world.side.items()}
    for provider in (a, b):
        for name in ended[provider.name]:
            # Their runners ran and exited (not a crash loop): the pass deletes the machines.
            record = engine.runners.get(name)
            assert record is not None
            engine.mark_connected(record)
            provider.stop_machine(name)

    # Pass 1: a lists, but does not answer its Deletes; b's three are held until all arrived.
    a.script.go_silent("Delete")
    gate = b.script.gates["Delete"] = asyncio.Event()

    async def open_when_all_arrived() -> None:
        loop = asyncio.get_running_loop()
        give_up = loop.time() + WAIT
        while b.in_flight["Delete"] < 3 and loop.time() < give_up:
            await asyncio.sleep(0.01)
        gate.set()

    opener = asyncio.ensure_future(open_when_all_arrived())
    await engine.reconcile()
    await opener
    await engine.drain_tasks()  # the replacements the pass asked for
    assert b.most_in_flight["Delete"] == 3, "b's deletes were sent together"
    assert not ended["b"] & set(b.machines)
    assert len(a.calls("Delete")) == 2 and ended["a"] <= set(a.machines)
    # A Delete that got no answer marks a unreachable, as a Create's or a List's silence does:
    # no replacement is sent to it.
    assert not engine.fleet.is_reachable("a")
    assert len(a.calls("Create")) == 2, "no Create after its Deletes went unanswered"

    # Pass 2: a does not list; its machines wait for it, keeping their place in its limit.
    a.script.go_silent("List")
    await engine.reconcile()
    await engine.drain_tasks()
    assert not engine.fleet.is_reachable("a")
    assert len(a.calls("Delete")) == 2, "no delete sent to an unreachable provider"
    assert engine.fleet.provider_count("a") == len(a.machines) == 2, "2 leaving"

    # Pass 3: a lists again: its ended machines are deleted, and the replacements created.
    a.script.answer()
    await engine.reconcile()
    await engine.drain_tasks()
    assert not ended["a"] & set(a.machines)
    assert engine.fleet.provider_count("a") == len(a.machines) == 2, "2 replacements"


async def test_a_runner_removed_by_hand_from_an_unreachable_provider_waits_for_its_delete(
    worlds: Callable[..., World],
) -> None:
    world = worlds([scale_set("on-a", ["a"])])
    await world.start()
    a = world.side["a"]
    await world.demand("on-a", 1)
    a.script.go_silent("List")
    await world.engine.reconcile()
    await world.engine.drain_tasks()
    name = next(iter(a.machines))
    answer = await Control.of(world.engine).remove_runners([name])
    assert answer == [
        {"name": name, "ok": True, "message": f"{name}: removed; its machine is deleted once a "
         "lists again"}
    ]  # fmt: skip
    assert a.calls("Delete") == [] and name in a.machines
    a.script.answer()
    await world.engine.reconcile()
    assert [r.name for r in a.calls("Delete")] == [name] and name not in a.machines


# ------------------------------------------------------------------ probes and reconnects


async def test_an_unreachable_provider_that_answers_is_back_by_the_next_probe_not_the_next_pass(
    worlds: Callable[..., World],
) -> None:
    # Broken before: nothing listed a between passes, so it stayed out for reconcile_interval.
    clock = FakeClock()
    world = worlds([scale_set("on-a", ["a"]), scale_set("on-b", ["b"])], clock=clock)
    await world.start()
    a = world.side["a"]
    a.script.go_silent("List", times=1)
    runloop = RunLoop.of(world.engine)
    await runloop.start()
    try:
        await wait_until(lambda: len(a.calls("List")) == 1)
        await wait_until(lambda: not world.engine.fleet.is_reachable("a"))
        world.engine.on_demand("on-a", 1)  # a job waits: nowhere to place it yet
        await world.engine.drain_tasks()
        assert a.calls("Create") == []
        await clock.run_for(TIMING.probe_interval)  # well before the next pass (30 s)
        await wait_until(lambda: len(a.calls("Create")) == 1)
        assert world.engine.fleet.is_reachable("a")
        assert len(a.calls("List")) == 2, "the probe's List, no pass's"
        assert len(world.side["b"].calls("List")) == 1, "only unreachable providers are probed"
    finally:
        await runloop.stop()
