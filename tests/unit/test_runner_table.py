"""The runner table's indexes by scale set and provider agree with its records."""

from __future__ import annotations

from rungar.engine.core.records import RunnerRecord, RunnerTable
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


def test_the_first_wanted_runner_on_each_provider_is_found_without_walking_the_rest() -> None:
    table = RunnerTable()
    table.add(record("busy", "a", "p", RunnerState.BUSY))
    table.add(record("p1", "a", "p", RunnerState.IDLE))
    table.add(record("q1", "a", "q", RunnerState.STARTING))
    table.add(record("other", "b", "r", RunnerState.IDLE))
    for i in range(1000):
        table.add(record(f"late{i}", "a", "p" if i % 2 else "q", RunnerState.IDLE))
    asked: list[str] = []

    def idle_or_starting(r: RunnerRecord) -> bool:
        asked.append(r.name)
        return r.state in (RunnerState.IDLE, RunnerState.STARTING)

    assert table.first_on_each_provider("a", idle_or_starting) == {"p": "p1", "q": "q1"}
    assert asked == ["busy", "p1", "q1"], "every provider holding a runner of a has its answer"
    table.pop("q1")
    assert table.first_on_each_provider("a", idle_or_starting) == {"p": "p1", "q": "late0"}
    for name in ["busy", "p1"] + [f"late{i}" for i in range(1, 1000, 2)]:
        table.pop(name)
    asked.clear()
    assert table.first_on_each_provider("a", idle_or_starting) == {"q": "late0"}
    assert asked == ["late0"], "a provider left with none of a's runners is not waited for"
    assert table.first_on_each_provider("nope", idle_or_starting) == {}
