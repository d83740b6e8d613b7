"""The runner table's indexes by scale set and provider agree with its records."""

from __future__ import annotations

from rungar.engine.records import RunnerRecord, RunnerTable
from rungar.model.runner import RunnerState


def record(name: str, scale_set: str, provider: str, state: RunnerState) -> RunnerRecord:
    return RunnerRecord(name, scale_set, provider, "rev", 0.0, state)


def test_runners_are_found_by_scale_set_and_provider_and_forgotten_when_popped() -> None:
    table = RunnerTable()
    table.add(record("a1", "a", "p", RunnerState.IDLE))
    table.add(record("a2", "a", "q", RunnerState.BUSY))
    table.add(record("b1", "b", "p", RunnerState.IDLE))

    assert sorted(r.name for r in table.of("a")) == ["a1", "a2"]
    assert sorted(r.name for r in table.on("p")) == ["a1", "b1"]
    table.pop("a1")
    assert [r.name for r in table.of("a")] == ["a2"]
    assert [r.name for r in table.on("p")] == ["b1"]
    assert table.of("nope") == [] and table.on("nope") == []


def test_live_runners_leave_out_those_leaving_even_after_their_state_changes() -> None:
    table = RunnerTable()
    leaving = record("a1", "a", "p", RunnerState.IDLE)
    table.add(leaving)
    table.add(record("a2", "a", "p", RunnerState.STARTING))
    leaving.state = RunnerState.LEAVING  # the engine changes a record's state in place

    assert [r.name for r in table.live("a")] == ["a2"]
    assert len(table.of("a")) == 2


def test_adding_a_name_again_replaces_it_in_every_index() -> None:
    table = RunnerTable()
    table.add(record("x", "a", "p", RunnerState.IDLE))
    table.add(record("x", "b", "q", RunnerState.IDLE))  # adopted again under another scale set

    assert table.of("a") == [] and table.on("p") == []
    assert [r.scale_set for r in table.of("b")] == ["b"]
    assert len(table) == 1
