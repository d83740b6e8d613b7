"""What the daemon does to the fleet is in the event log and the log: an adoption (with why),
a create cut short and settled, a machine found gone, an orphan registration swept, each as an
event (what ``rungar events`` shows) and a log line naming the runner, provider and scale set.
The catalogue of event kinds is the one ``rungar events --help`` and docs/events.md document.
"""

from __future__ import annotations

import argparse
import ast
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from rungar.cli.main import build_parser
from rungar.engine.core.naming import runner_name
from rungar.engine.report.events import EVENT_ACTIONS, Event
from rungar.model.create_intent import CreateIntent
from tests.integration.test_engine_lifecycle import World

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def world(tmp_path: Path) -> World:
    w = World(tmp_path)
    await w.start()
    return w


def events_of(world: World, action: str) -> list[Event]:
    return [e for e in world.engine.events.recent() if e.action == action]


def log_of(logs: list[MutableMapping[str, Any]], event: str) -> MutableMapping[str, Any]:
    [line] = [entry for entry in logs if entry["event"] == event]
    return line


async def test_a_machine_found_after_a_restart_is_adopted_with_why_in_an_event_and_a_log_line(
    world: World,
) -> None:
    await world.demand(1)
    (name,) = world.on("compute1")
    world.engine = world.new_engine()  # a new daemon: the machine is unknown to it
    await world.start()
    with capture_logs() as logs:
        await world.engine.reconcile()
    [event] = events_of(world, "adopted")
    assert (event.name, event.provider, event.scale_set) == (name, "compute1", "linux")
    assert event.attributes["why"] == "untracked"
    assert "unknown to the daemon" in event.message
    line = log_of(logs, "runner.adopted")
    assert (line["runner"], line["provider"], line["scale_set"], line["why"]) == (
        name,
        "compute1",
        "linux",
        "untracked",
    )


async def test_a_create_cut_short_whose_machine_exists_is_adopted_as_an_interrupted_create(
    world: World,
) -> None:
    await world.demand(1)
    (name,) = world.on("compute1")
    record = world.engine.runners.pop(name)  # the daemon died after Create, before recording
    assert record is not None
    world.engine.store.write_intent(
        CreateIntent(name, "linux", "req-1", record.runner_id, "compute1", world.clock.now())
    )
    with capture_logs() as logs:
        await world.engine.reconcile()
    [event] = events_of(world, "adopted")
    assert event.attributes["why"] == "interrupted_create"
    assert log_of(logs, "runner.adopted")["why"] == "interrupted_create"


async def test_a_create_cut_short_with_no_machine_is_settled_in_an_event_and_a_log_line(
    world: World,
) -> None:
    name = runner_name("linux", "0a0b0c0d")
    runner_id, _ = await world.github.generate_jit_config(world.engine.sets["linux"].id, name)
    world.engine.store.write_intent(
        CreateIntent(name, "linux", "req-1", runner_id, "compute1", world.clock.now())
    )
    with capture_logs() as logs:
        await world.engine.reconcile()
    [event] = events_of(world, "settled")
    assert (event.name, event.provider, event.scale_set) == (name, "compute1", "linux")
    assert "registration was removed" in event.message
    line = log_of(logs, "runner.create_settled")
    assert (line["runner"], line["provider"], line["scale_set"]) == (name, "compute1", "linux")


async def test_a_machine_deleted_outside_rungar_is_settled_in_an_event_and_a_log_line(
    world: World,
) -> None:
    await world.demand(1)
    (name,) = world.on("compute1")
    world.providers["compute1"].delete_now(name)  # gone behind the daemon's back
    world.clock.advance(1)
    with capture_logs() as logs:
        await world.engine.reconcile()
    [event] = events_of(world, "machine_gone")
    assert (event.name, event.provider, event.scale_set) == (name, "compute1", "linux")
    line = log_of(logs, "runner.machine_gone")
    assert (line["runner"], line["provider"], line["scale_set"]) == (name, "compute1", "linux")
    assert name not in world.engine.runners


async def test_an_orphan_registration_swept_is_an_event_and_a_log_line(world: World) -> None:
    name = runner_name("linux", "0f0e0d0c")
    await world.github.generate_jit_config(world.engine.sets["linux"].id, name)  # no machine
    await world.engine.reconcile()  # seen offline: swept only after start_timeout
    assert events_of(world, "removed") == []
    world.clock.advance(61)
    with capture_logs() as logs:
        await world.engine.reconcile()
    [event] = events_of(world, "removed")
    assert (event.name, event.provider, event.scale_set) == (name, "", "linux")
    assert event.attributes["reason"] == "orphaned"
    line = log_of(logs, "runner.orphan_swept")
    assert (line["runner"], line["provider"], line["scale_set"]) == (name, "", "linux")
    assert name not in {r.name for r in world.github.runners.values()}


def recorded_actions() -> set[tuple[str, str]]:
    """Every (kind, action) written as literals in an ``events.record(...)`` call of the daemon,
    plus the refusal actions chosen at run time (``full``/``failing``)."""
    found = {("provider", "full"), ("provider", "failing")}
    for path in (ROOT / "rungar").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "record"
                and len(node.args) >= 3
                and all(isinstance(a, ast.Constant) for a in (node.args[0], node.args[2]))
            ):
                kind, action = node.args[0], node.args[2]
                assert isinstance(kind, ast.Constant) and isinstance(action, ast.Constant)
                found.add((str(kind.value), str(action.value)))
    return found


def test_every_event_the_daemon_records_is_in_the_documented_catalogue() -> None:
    assert recorded_actions() == set(EVENT_ACTIONS)


def test_rungar_events_help_and_the_docs_list_every_kind_and_the_json_shape() -> None:
    parser = build_parser("events")
    subparsers = next(a for a in parser._actions if a.dest == "command")
    assert isinstance(subparsers.choices, dict)
    events_parser = subparsers.choices["events"]
    assert isinstance(events_parser, argparse.ArgumentParser)
    help_text = events_parser.format_help()
    docs = (ROOT / "docs" / "events.md").read_text(encoding="utf-8")
    for kind, action in EVENT_ACTIONS:
        assert f"{kind} {action}" in help_text
        assert f"| `{kind}` | `{action}` |" in docs
    for field in ("time", "kind", "name", "action", "scale_set", "provider", "message"):
        assert f'"{field}"' in help_text
        assert f"| `{field}` |" in docs
    assert "stable" in docs and '"attributes"' in help_text
