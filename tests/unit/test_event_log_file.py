"""The event log's file: each line is the event as JSON, and compaction keeps the newest."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from rungar.engine.report.events import Event, EventLog
from rungar.testing.clock import FakeClock


def test_an_event_line_is_the_whole_event_as_json_with_sorted_keys() -> None:
    event = Event(12.5, "runner", "r1", "created", "s", "p", "made", {"b": 1, "a": [1, 2]})

    assert json.loads(event.to_json()) == asdict(event)
    assert event.to_json() == json.dumps(asdict(event), sort_keys=True, default=str)


def test_compaction_rewrites_the_file_with_the_newest_events_only(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    log = EventLog(FakeClock(), path, max_count=300)
    for i in range(500):  # the 500th write compacts
        log.record("runner", f"r{i}", "created", scale_set="s", n=i)

    lines = path.read_text().splitlines()
    assert [json.loads(line)["name"] for line in lines] == [f"r{i}" for i in range(200, 500)]
    assert lines == [e.to_json() for e in log.recent()]
    reloaded = EventLog(FakeClock(), path, max_count=300)
    assert [e.name for e in reloaded.recent()] == [f"r{i}" for i in range(200, 500)]
