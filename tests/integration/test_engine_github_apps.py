"""The engine registering through several GitHub Apps (docs/github.md, "More than one App"):
registrations spread over them, and an App GitHub refuses is skipped with one event while the
others carry on, and shows as failing in ``rungar status``."""

from __future__ import annotations

from pathlib import Path

from rungar.daemon.status import daemon_notes, snapshot
from rungar.engine.engine import Engine
from rungar.engine.report.events import EventLog
from rungar.github.registrations import RegistrationQueue
from rungar.store.sqlite import SqliteStore
from tests.integration.test_engine_lifecycle import World


def two_apps(world: World) -> Engine:
    return Engine(
        world.cfg,
        world.providers,
        world.github,
        clock=world.clock,
        store=SqliteStore(world.tmp_path / "state.db"),
        events=EventLog(world.clock, world.tmp_path / "events.jsonl"),
        installation="gh-test",
        registrations=RegistrationQueue(world.clock, apps=["Iv1.first", "Iv1.second"]),
    )


async def test_registrations_spread_over_the_apps(tmp_path: Path) -> None:
    world = World(tmp_path)
    world.engine = two_apps(world)
    await world.start()
    await world.demand(4)
    assert sorted(world.github.registered_by.values()) == [0, 0, 1, 1]
    apps = snapshot(world.engine.ctx)["daemon"]["registrations"]["apps"]
    assert [(a["app"], a["state"], a["taken"]) for a in apps] == [
        ("Iv1.first", "ok", 2),
        ("Iv1.second", "ok", 2),
    ]


async def test_a_refused_app_is_skipped_with_one_event_and_the_other_registers(
    tmp_path: Path,
) -> None:
    world = World(tmp_path)
    world.engine = two_apps(world)
    await world.start()
    world.github.refused_apps.add(1)
    await world.demand(6)
    assert len(world.engine.runners) == 6, "every runner was registered, by the other App"
    assert set(world.github.registered_by.values()) == {0}
    failing = [e for e in world.engine.events.recent() if e.kind == "github_app"]
    assert [(e.name, e.action) for e in failing] == [("Iv1.second", "failing")]
    assert "Iv1.second" in failing[0].message and "401" in failing[0].attributes["error"]
    daemon = snapshot(world.engine.ctx)["daemon"]
    second = daemon["registrations"]["apps"][1]
    assert (second["state"], second["failing_since"]) == ("failing", world.clock.now())
    notes = {n["label"]: n["text"] for n in daemon_notes(daemon)}
    assert notes["App Iv1.second"].startswith("failing, skipped: installation token: HTTP 401")
    assert notes["App Iv1.first"] == "at once; 6 in the trailing minute"

    # GitHub takes the App again: after app_retry_after it registers once more, said once.
    world.github.refused_apps.clear()
    world.clock.advance(world.engine.registrations.app_retry_after)
    await world.demand(8)
    second_app = 1  # the App GitHub refused, by its index in github.apps
    assert second_app in world.github.registered_by.values(), "the refused App registers again"
    actions = [e.action for e in world.engine.events.recent() if e.kind == "github_app"]
    assert actions == ["failing", "working"]


async def test_with_one_app_a_refusal_fails_the_create_as_it_always_did(tmp_path: Path) -> None:
    world = World(tmp_path)
    await world.start()
    world.github.refused_apps.add(0)
    await world.demand(1)
    assert len(world.engine.runners) == 0
    assert not [e for e in world.engine.events.recent() if e.kind == "github_app"]
    assert snapshot(world.engine.ctx)["daemon"]["registrations"]["apps"] == []
