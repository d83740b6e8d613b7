"""Auto sizing inside the running daemon: its first look, at start, rewrites the TOML (comments
kept), the provider admits new runners with the new memory cap at once, and the change is a
``sizing.changed`` event; the next look comes 5 minutes later."""

from __future__ import annotations

import asyncio
from pathlib import Path

from runnerd.config import load_config
from runnerd.daemon import open_daemon
from runnerd.running import reload, start_auto_sizing
from runnerd.sizing.changes import DONE, PENDING, UNSURE, Change, ChangeLog, Values

from rungar.model.machine import Created, CreateRequest
from rungar.model.runner_block import RunnerBlock
from rungar.testing.clock import FakeClock
from tests.unit.sizing_fixtures import NOW, G, light_history
from tests.unit.test_runnerd_provider import FakeRuntime

TOML = """\
# runnerd on the build host
[host]
memory_max = "33G"
cpus = 8
state_dir = "{state}"

[sizing]
auto = {auto}   # runnerd init turns it on

[profiles.node]
command = ["true"]
cpus = 8
memory = "7G"   # still each container's hard limit
slots = 2
"""


def request(name: str) -> CreateRequest:
    return CreateRequest(
        runner_name=name,
        request_id=f"req-{name}",
        scale_set="node",
        labels={},
        runner=RunnerBlock(),
        jit_config="secret",
        job_hints=(),
        deadline=NOW + 600,
    )


async def settle_until(condition: object, tries: int = 200) -> None:
    for _ in range(tries):
        if callable(condition) and condition():
            return
        await asyncio.sleep(0)


async def test_the_first_look_at_start_rewrites_the_file_and_new_runners_get_the_new_cap(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runnerd.toml"
    text = TOML.format(state=tmp_path / "state", auto="true")
    path.write_text(text)
    (tmp_path / "state").mkdir()
    light_history(tmp_path / "state" / "history.db")
    clock = FakeClock(NOW)
    daemon = await open_daemon(load_config(str(path)), clock, FakeRuntime(), config_text=text)
    before = await daemon.provider.create(request("before"))
    assert isinstance(before, Created)
    task = start_auto_sizing(daemon, str(path), text)
    assert task is not None
    try:
        await settle_until(lambda: path.read_text() != text)  # no clock advance: at start
        written = path.read_text()
        assert 'memory = "5.25G"   # still each container\'s hard limit' in written
        assert "# runnerd on the build host" in written and "auto = true   # runnerd" in written
        assert daemon.config.profiles["node"].memory == int(5.25 * G)
        after = await daemon.provider.create(request("after"))
        assert isinstance(after, Created)
        runners = daemon.provider.runners
        assert runners["after"].profile.memory == int(5.25 * G)
        assert runners["after"].reserved == int(5.25 * G)  # caps: a runner reserves its cap
        assert runners["before"].profile.memory == 7 * G  # a running runner keeps its own
        with ChangeLog(tmp_path / "state" / "history.db") as log:
            assert [c.state for c in log.changes("node")] == [DONE]
        assert daemon.provider.events is not None
        (event,) = [e for e in daemon.provider.events.after(0) if e.kind == "sizing.changed"]
        assert event.subject == "node" and event.data["new"]["memory"] == int(5.25 * G)
        assert event.data["old"]["memory"] == 7 * G and event.data["source"] == "auto"
        assert event.message.startswith("node: memory 7G → 5.25G (auto lower)")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await daemon.close()


async def test_with_auto_off_a_change_a_crash_left_is_settled_and_nothing_looks(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runnerd.toml"
    text = TOML.format(state=tmp_path / "state", auto="false")
    path.write_text(text)
    (tmp_path / "state").mkdir()
    db = tmp_path / "state" / "history.db"
    light_history(db)
    with ChangeLog(db) as log:  # recorded, then killed before the write
        log.record(Change("node", NOW - 60, "auto", "lower", "", Values(7 * G, 2, 8.0),
                          Values(5 * G, 2, 8.0), state=PENDING))  # fmt: skip
    daemon = await open_daemon(load_config(str(path)), FakeClock(NOW), FakeRuntime(), text)
    try:
        assert start_auto_sizing(daemon, str(path), text) is None
        assert path.read_text() == text
        with ChangeLog(db) as log:
            assert [c.state for c in log.changes("node")] == [UNSURE]
    finally:
        await daemon.close()


async def test_a_reload_runs_the_edited_file_and_a_file_that_fails_the_check_is_refused(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runnerd.toml"
    text = TOML.format(state=tmp_path / "state", auto="false")
    path.write_text(text)
    daemon = await open_daemon(load_config(str(path)), FakeClock(NOW), FakeRuntime(), text)
    try:
        start_auto_sizing(daemon, str(path), text)
        assert daemon.sizer is not None
        path.write_text(text.replace("slots = 2", "slots = 3"))
        assert reload(daemon, str(path)) == []
        assert daemon.provider.config.profiles["node"].slots == 3
        assert daemon.sizer.running_text == path.read_text()  # auto sizing may go on
        path.write_text(text.replace('memory = "7G"', 'memory = "34G"'))  # over the 33G
        problems = reload(daemon, str(path))
        assert len(problems) == 1 and "more than the slice's MemoryMax of 33G" in problems[0]
        assert daemon.provider.config.profiles["node"].memory == 7 * G  # still as it ran
    finally:
        await daemon.close()
