"""Apply, undo and auto sizing against real files and a real SQLite history (docs/admission.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from runnerd.config import parse_config
from runnerd.history import History
from runnerd.sizing.apply import edit_profile, undo
from runnerd.sizing.autorun import AutoSizer
from runnerd.sizing.changes import DONE, UNSURE, Change, ChangeLog, Values
from runnerd.sizing.report import apply_command, sizing_report

from rungar.errors import ConfigError
from tests.unit.sizing_fixtures import NOW, G, light_history

TOML = """\
# runnerd on the build host
[host]
slice = "runnerd.slice"
memory_max = "33G"

[sizing]
auto = true   # runnerd init turns it on

[profiles.node]
image = "ghcr.io/ayagmar/runnerd-runner:node-0.0.20"
cpus = 8
memory = "7G"   # still each container's hard limit
slots = 2
min_memory = "2G"   # optional: never lower than this
"""


class Clock:
    def __init__(self, now: float) -> None:
        self.t = now

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.t += seconds


def test_an_edit_keeps_comments_and_layout() -> None:
    text = edit_profile(TOML, "node", Values(6 * G, 3, 8.0))
    assert 'memory = "6G"   # still each container\'s hard limit' in text
    assert "slots = 3\n" in text and "# runnerd on the build host" in text
    assert text.replace('"6G"', '"7G"').replace("slots = 3", "slots = 2") == TOML


def test_apply_writes_the_advice_and_undo_writes_the_old_values_back(tmp_path: Path) -> None:
    path, db = tmp_path / "runnerd.toml", tmp_path / "history.db"
    path.write_text(TOML)
    light_history(db)
    config = parse_config(TOML, str(path))
    report = sizing_report(config, db, 33 * G, NOW)
    assert report.advice[0].new_memory == 3 * G  # 2G + 1G
    change = apply_command(path, db, config, "node", 33 * G, None, NOW)
    assert change.state == DONE and 'memory = "3G"   # still' in path.read_text()
    with ChangeLog(db) as log:
        undone = undo(path, "node", log, 33 * G, None, NOW + 60)
    assert undone.new == Values(7 * G, 2, 8.0) and path.read_text() == TOML
    assert [c.source for c in sizing_report(config, db, 33 * G, NOW + 60).changes] == [
        "apply",
        "undo",
    ]


def test_a_change_memory_max_cannot_hold_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    path, db = tmp_path / "runnerd.toml", tmp_path / "history.db"
    text = TOML.replace('memory = "7G"', 'memory = "30G"')
    path.write_text(text.replace('memory_max = "33G"', 'memory_max = "64G"'))
    History(db).close()
    with ChangeLog(db) as log:
        log.record(
            Change(
                "node", NOW, "apply", "lower", "", Values(15 * G, 2, 8.0), Values(30 * G, 2, 8.0),
                state=DONE,
            )
        )  # fmt: skip
        before = path.read_text()
        with pytest.raises(ConfigError) as refused:
            undo(path, "node", log, 20 * G, None, NOW)
        assert "MemoryMax" in refused.value.problems[0]
        assert path.read_text() == before
        assert len(log.changes("node")) == 1  # a refused change is not recorded


def test_auto_sizing_survives_a_kill_between_record_and_write(tmp_path: Path) -> None:
    path, db = tmp_path / "runnerd.toml", tmp_path / "history.db"
    path.write_text(TOML)
    light_history(db)

    def crash(_: object) -> None:
        raise KeyboardInterrupt("killed between the record and the write")

    sizer = AutoSizer(path, db, Clock(NOW), TOML, lambda: (33 * G, 8.0), before_write=crash)
    with pytest.raises(KeyboardInterrupt):
        sizer.look()
    assert path.read_text() == TOML  # not written
    with ChangeLog(db) as log:
        assert [c.state for c in log.changes()] == ["pending"]
    restarted = AutoSizer(path, db, Clock(NOW + 60), TOML, lambda: (33 * G, 8.0))
    (settled,) = restarted.start()
    assert settled.state == UNSURE  # the file lacks its values: it may not have been written
    assert restarted.look().written == ()  # it still holds the interval
    later = AutoSizer(path, db, Clock(NOW + 2 * 3600), TOML, lambda: (33 * G, 8.0))
    (change,) = later.look().written
    assert change.new.memory == int(5.25 * G) and 'memory = "5.25G"' in path.read_text()


def test_a_change_written_before_the_crash_is_settled_as_done(tmp_path: Path) -> None:
    path, db = tmp_path / "runnerd.toml", tmp_path / "history.db"
    path.write_text(TOML)
    light_history(db)
    sizer = AutoSizer(path, db, Clock(NOW), TOML, lambda: (33 * G, 8.0))
    (change,) = sizer.look().written
    with ChangeLog(db) as log:
        log.mark(change.id, "pending")  # as if killed after the write, before the mark
    (settled,) = AutoSizer(path, db, Clock(NOW), path.read_text(), lambda: (33 * G, 8.0)).start()
    assert settled.state == DONE


def test_auto_sizing_never_writes_over_a_file_edited_on_disk(tmp_path: Path) -> None:
    path, db = tmp_path / "runnerd.toml", tmp_path / "history.db"
    edited = TOML.replace("slots = 2", "slots = 3")
    path.write_text(edited)
    light_history(db)
    result = AutoSizer(path, db, Clock(NOW), TOML, lambda: (33 * G, 8.0)).look()
    assert result.skipped == "the config file was edited on disk"
    assert path.read_text() == edited
    assert AutoSizer(path, db, Clock(NOW), edited, lambda: (33 * G, 8.0)).look().written


def test_no_cpu_raise_is_said_with_why_against_the_slices_cpus_without_host_cpus(
    tmp_path: Path,
) -> None:
    from runnerd.history import JobEnd, JobKey, JobStart
    from runnerd.history_generate import GeneratedJob, write_history

    db = tmp_path / "history.db"
    rows = []
    for i in range(3):  # one job averaging 7.0 of its 8 cpus: it wants more
        at = NOW - 3600 + i * 600
        start = JobStart(
            f"c{i}", "node", "node", 7 * G, 8.0, "caps", 7 * G, 8.0, "cap", None, None, at - 300
        )
        end = JobEnd("succeeded", 2 * G, 7.0, False, False, 0, at)
        rows.append(GeneratedJob(start, JobKey("node", "a/b", "ci", "build"), end, str(i)))
    write_history(db, rows)
    config = parse_config(TOML, str(tmp_path / "runnerd.toml"))
    assert config.host.cpus is None  # no [host] cpus: the slice's are read
    report = sizing_report(config, db, 33 * G, NOW, slice_cpus=8.0)
    (note,) = report.notes
    assert note.startswith("node: No CPU raise: a/b build averages 7.0 of its 8 cpus")
    assert note.endswith("and they take the slice's 8 CPUs") and note in report.text()
