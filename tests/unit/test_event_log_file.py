"""The event log's file: each line is the event as JSON, and compaction keeps the newest."""

from __future__ import annotations

import gc
import json
import tracemalloc
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


def test_the_kept_events_take_at_most_max_bytes_of_memory_and_of_file(tmp_path: Path) -> None:
    """Refusals whose messages are cut at 4 KiB: what the log keeps is bounded by its bytes,
    counted as the memory its kept events hold, not only as a tally of their lines."""
    path = tmp_path / "events.jsonl"
    max_bytes = 256 * 1024
    message = "…" + "x" * 10_000  # cut to 4 KiB; "…" makes it two bytes a character in memory
    tracemalloc.start()
    try:
        log = EventLog(FakeClock(), path, max_count=10_000, max_bytes=max_bytes)
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for i in range(2_000):
            log.record("provider", "b", "full", provider="b", message=message, refusals=i)
        log.close()
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()

    events = log.recent()
    assert events[-1].attributes == {"refusals": 1999}
    assert 20 <= len(events) < 2_000, "the oldest went, by bytes rather than by count"
    assert len("".join(e.to_json() + "\n" for e in events)) <= max_bytes
    assert kept <= max_bytes * 1.25, f"{kept} bytes kept in memory for {max_bytes} of events"
    assert path.stat().st_size <= max_bytes + max_bytes // 4 + 8192, "compacted as it went"
