"""Scaling in the engine on a fake clock: schedule windows, the idle reserve that yields to real
work, and crash-loop backoff. Fake GitHub, fake providers and a real SQLite store, driven step by
step (demand, drain the creates, reconcile) so every assertion is exact."""

from __future__ import annotations

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
from rungar.engine.control import Control
from rungar.engine.engine import Engine
from rungar.engine.events import EventLog
from rungar.engine.reconcile import reconcile
from rungar.engine.status import snapshot
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
            store=SqliteStore(self.tmp_path / "state.db"),
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
        await reconcile(self.engine)
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
    document = snapshot(world.engine)
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
    found = Control(world.engine).inspect_scale_set("office")
    lines = "\n".join(inspect_lines(found))
    assert "Schedule:" in lines and "Tue 18:00 (in 9h)" in lines
