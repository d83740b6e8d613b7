"""Room that opens on a held provider goes to its holder at once, on the engine's virtual clock.

A priority-10 scale set (4 vCPU runners) finds the one host full of 2-vCPU runners of a
priority-0 one and holds it. Each small job that ends deletes its machine: the holder is tried
there at once, without the clock moving, not after its 15 s backoff or the next pass."""

from __future__ import annotations

from pathlib import Path

from rungar.config.model import (
    Placement,
    ProviderConfig,
    ScaleSetConfig,
    ScaleSetProvider,
    ScaleSetsFile,
    Timing,
)
from rungar.engine.engine import Engine
from rungar.engine.report.events import EventLog
from rungar.model.machine import Conclusion
from rungar.store.sqlite import SqliteStore
from rungar.testing.clock import FakeClock
from rungar.testing.fake_github import FakeGitHub
from rungar.testing.fake_provider import GIB, FakeProvider

SMALL = {"vcpus": 2, "memory": "4GiB"}
LARGE = {"vcpus": 4, "memory": "8GiB"}
T0 = 1_800_000_000.0


def scale_set(name: str, runner: dict[str, object], **kw: object) -> ScaleSetConfig:
    return ScaleSetConfig(
        name,
        max_runners=4,
        placement=Placement.PACK,
        providers=(ScaleSetProvider("host", runner),),
        start_timeout=60,
        **kw,  # type: ignore[arg-type]  # priority only
    )


async def held_host(tmp_path: Path) -> tuple[Engine, FakeClock, FakeGitHub]:
    clock = FakeClock(T0)
    github = FakeGitHub()
    providers = {"host": FakeProvider("host", vcpus=4, memory_bytes=16 * GIB, clock=clock)}
    config = ScaleSetsFile(
        (ProviderConfig("host", "fake"),),
        (scale_set("small", SMALL), scale_set("large", LARGE, priority=10)),
        Timing(reconcile_interval=30, left_grace=0),
    )
    engine = Engine(
        config,
        providers,
        github,
        clock=clock,
        store=SqliteStore(tmp_path / "state.db", now=clock.now),
        events=EventLog(clock, tmp_path / "events.jsonl"),
        installation="gh-test",
    )
    for state in engine.sets.values():
        state.id = await github.ensure_scale_set(state.config)
    engine.on_demand("small", 2)
    await engine.drain_tasks()
    for record in list(engine.runners):
        github.start_runner(record.name, busy=True)
    await engine.reconcile()
    await engine.drain_tasks()
    assert len(engine.runners.live("small")) == 2, "two small runners fill the host"
    clock.advance(1)
    engine.on_demand("large", 1)
    await engine.drain_tasks()
    assert engine.runners.live("large") == []
    hold = engine.fleet.hold_on("host", clock.now())
    assert hold is not None and hold.holder == "large"
    return engine, clock, github


async def finish(engine: Engine, name: str, job: str) -> None:
    engine.on_job_completed("small", job, name, Conclusion.SUCCEEDED)
    await engine.drain_tasks()


async def test_room_opening_on_a_held_host_has_its_holder_create_there_without_waiting(
    tmp_path: Path,
) -> None:
    engine, clock, _ = await held_host(tmp_path)
    first, second = (r.name for r in engine.runners.live("small"))
    clock.advance(1)
    await finish(engine, first, "job-1")
    assert engine.runners.live("large") == [], "2 vCPUs free: not yet room for 4"
    assert engine.fleet.skip_reason("large", "host", clock.now()) == "full"
    clock.advance(2)
    opened_at = clock.now()
    await finish(engine, second, "job-2")
    (large,) = engine.runners.live("large")
    assert large.provider == "host"
    assert large.created_at - opened_at < 1.0, "created within 1 s of the room opening"
    created = [e for e in engine.events.recent() if e.action == "created" and e.name == large.name]
    # Room first opened with the first small machine gone, 2 s before the holder could use it.
    assert created[0].attributes["held_room_idle"] == 2.0
    assert engine.fleet.hold_on("host", clock.now()) is None, "placing lifts its hold"


async def test_room_a_lower_priority_cannot_take_stays_for_the_holder(tmp_path: Path) -> None:
    engine, clock, _ = await held_host(tmp_path)
    first = engine.runners.live("small")[0].name
    await finish(engine, first, "job-1")
    engine.on_demand("small", 2)  # another small job: the room is held, not its to take
    await engine.drain_tasks()
    assert len(engine.runners.live("small")) == 1
    assert engine.fleet.skip_reason("small", "host", clock.now()) == "held for scale set large"


async def test_a_delete_that_gets_no_answer_marks_the_provider_unreachable(
    tmp_path: Path,
) -> None:
    """Nothing more is sent to a provider whose Delete went unanswered: no Create half a second
    later, until a List answers again."""
    engine, clock, _ = await held_host(tmp_path)
    host = engine.providers["host"]
    assert isinstance(host, FakeProvider)
    host.fail_deletes(always=True, unanswered=True)
    first = engine.runners.live("small")[0].name
    await finish(engine, first, "job-1")
    assert not engine.fleet.is_reachable("host")
    creates = host.calls["create"]
    clock.advance(0.5)
    engine.on_demand("small", 3)
    await engine.drain_tasks()
    assert host.calls["create"] == creates, "no Create to a provider that did not answer"
    unreachable = [e for e in engine.events.recent() if e.action == "unreachable"]
    assert unreachable and unreachable[0].provider == "host"
    host.heal()
    await engine.reconcile()  # a List answers: the provider is back
    assert engine.fleet.is_reachable("host")


async def test_room_on_the_host_replaces_an_idle_reserve_runner_on_the_priced_cloud(
    tmp_path: Path,
) -> None:
    """Hosts before the cloud: the reserve that went to the cloud while the host was full moves
    to the host when room opens there, the new runner created before the idle one is removed."""
    clock = FakeClock(T0)
    github = FakeGitHub()
    providers = {
        "host": FakeProvider("host", vcpus=2, memory_bytes=16 * GIB, clock=clock),
        "cloud": FakeProvider("cloud", vcpus=64, memory_bytes=256 * GIB, clock=clock),
    }
    both = (ScaleSetProvider("host", SMALL), ScaleSetProvider("cloud", SMALL))
    config = ScaleSetsFile(
        (ProviderConfig("host", "fake"), ProviderConfig("cloud", "fake", price_per_hour=0.4)),
        (
            ScaleSetConfig("work", max_runners=2, providers=both[:1], start_timeout=60),
            ScaleSetConfig("spare", max_runners=2, min_runners=1, providers=both, start_timeout=60),
        ),
        Timing(reconcile_interval=30, left_grace=0),
    )
    engine = Engine(
        config,
        providers,
        github,
        clock=clock,
        store=SqliteStore(tmp_path / "state.db", now=clock.now),
        events=EventLog(clock, tmp_path / "events.jsonl"),
        installation="gh-test",
    )
    for state in engine.sets.values():
        state.id = await github.ensure_scale_set(state.config)
    engine.on_demand("work", 1)
    await engine.drain_tasks()
    (busy,) = engine.runners.live("work")
    engine.on_demand("spare", 0)  # its reserve of one: the host is full, so the cloud
    await engine.drain_tasks()
    (spare,) = engine.runners.live("spare")
    assert spare.provider == "cloud"
    github.start_runner(busy.name, busy=True)
    github.start_runner(spare.name, busy=False)
    await engine.reconcile()
    await engine.drain_tasks()
    clock.advance(1)
    engine.on_job_completed("work", "job-1", busy.name, Conclusion.SUCCEEDED)
    await engine.drain_tasks()
    (moved,) = engine.runners.live("spare")
    assert moved.provider == "host" and moved.name != spare.name
    assert spare.name not in {m.name for m in providers["cloud"].machines}
    order = [(e.action, e.name) for e in engine.events.recent() if e.scale_set == "spare"]
    assert order.index(("created", moved.name)) < order.index(("removed", spare.name)), (
        "the new one is created before the idle one goes"
    )
