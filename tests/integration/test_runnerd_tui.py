"""``runnerctl tui`` driven by Textual's pilot, in process, against runnerd's real API served on a
temporary unix socket (a RunnerdProvider on a fake runtime), a real config file and a real
SQLite history: the status screen, watch mode, Sizing's ``a`` and job detail."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
from runnerd.admission.model import HostReading, SliceReading
from runnerd.api import serve_api
from runnerd.config import load_config
from runnerd.events import EventLog
from runnerd.history import History
from runnerd.provider import RunnerdProvider
from runnerd.sizing.changes import ChangeLog
from runnerd.tui.app import RunnerctlApp
from runnerd.tui.jobs import JobScreen, JobsScreen
from runnerd.tui.sizing import ConfirmApply, SizingScreen
from runnerd.tui.source import Source
from runnerd.tui.status import StatusScreen
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widgets import DataTable

from rungar.model.machine import Created, CreateRequest, JobHint
from rungar.model.runner_block import RunnerBlock
from rungar.testing.clock import FakeClock
from tests.unit.sizing_fixtures import NOW, G, light_history
from tests.unit.test_runnerd_provider import FakeRuntime
from tests.waiting import until_awaited

CONFIG = """\
# the build host
[host]
memory_max = "33G"
cpus = 8
state_dir = "{state}"
history = "{db}"

[profiles.node]
command = ["true"]
cpus = 8
memory = "7G"   # each container's hard limit
slots = 2
"""
SIZE = (120, 40)
S = TypeVar("S", bound=Screen[None])


@dataclass
class Runnerd:
    provider: RunnerdProvider
    source: Source
    config: Path
    db: Path
    reloads: list[str]  # the config file's text at each POST /reload

    async def start(self, name: str, job: JobHint | None = None) -> None:
        request = CreateRequest(name, f"q-{name}", "node", {}, RunnerBlock(), "jit-secret")
        assert isinstance(await self.provider.create(request), Created)
        if job is not None:
            await self.provider.update_runner(name, job)

    def app(self, watch: bool = True) -> RunnerctlApp:
        # Watch mode's refreshes come quickly so the tests wait briefly for them.
        return RunnerctlApp(self.source, watch=watch, interval=0.05, clock=lambda: NOW)


@pytest.fixture
async def runnerd(tmp_path: Path) -> AsyncIterator[Runnerd]:
    db = tmp_path / "history.db"
    light_history(db)  # node's 30 runs peak at 2G under 7G: the advice lowers it to 3G
    path = tmp_path / "runnerd.toml"
    path.write_text(CONFIG.format(state=tmp_path, db=db))
    history = History(db)
    clock = FakeClock()
    provider = RunnerdProvider(
        load_config(str(path)), FakeRuntime(), history, clock, 33 * G, 8.0, host_memory=64 * G
    )
    provider.readings.slice = SliceReading(clock.now(), 0)
    provider.readings.host = HostReading(clock.now(), 64 * G, 60 * G, 0.0, 0)
    provider.events = EventLog(db)
    socket_dir = Path(tempfile.mkdtemp(prefix="rdtui", dir="/tmp"))  # a unix socket path is short
    socket = socket_dir / "runnerd.sock"
    reloads: list[str] = []

    def reload() -> list[str]:  # what runnerd.daemon.reload is handed: the file as it is now
        reloads.append(path.read_text())
        return []

    api = await serve_api(provider, str(socket), reload=reload)
    try:
        yield Runnerd(provider, Source(str(path), str(socket)), path, db, reloads)
    finally:
        await api.stop()
        provider.events.close()
        history.close()
        shutil.rmtree(socket_dir, ignore_errors=True)


async def until(pilot: Pilot[None], check: Callable[[], bool], what: str) -> None:
    """Let the app run until ``check`` holds; fail naming ``what`` if it never does."""

    async def checked() -> bool:
        await pilot.pause(0.01)
        return check()

    await until_awaited(checked, f"happened: {what}", every=0)


def screen_of(app: RunnerctlApp, kind: type[S]) -> S:
    screen = app.screen
    assert isinstance(screen, kind), screen
    return screen


def runner_names(screen: StatusScreen) -> list[str]:
    table = screen.query_one("#runners", DataTable)
    return [str(table.get_row_at(i)[0]) for i in range(table.row_count)]


async def test_the_status_screen_shows_the_budget_the_host_line_and_each_runner_with_its_job(
    runnerd: Runnerd,
) -> None:
    await runnerd.start("r1", JobHint("octo/app", "ci", "build", "4242"))
    app = runnerd.app(watch=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.status_screen
        await until(pilot, lambda: screen.refreshes >= 1, "the first status")
        assert runner_names(screen) == ["r1"]
        row = screen.query_one("#runners", DataTable).get_row_at(0)
        assert row[3:5] == ["running", "7G"] and row[-1] == "octo/app ci/build"
        lines = str(screen.query_one("#lines").render())
        assert lines.startswith("budget: 7G of 33G reserved (caps), 26G free\nhost: ")
        assert "\nqueue: nothing waits" in lines  # as runnerctl status prints it
        assert screen.problem == ""
        await pilot.press("q")
    assert app.return_code == 0


async def test_watch_mode_shows_a_new_runner_and_a_new_event_without_a_key(
    runnerd: Runnerd,
) -> None:
    await runnerd.start("r1")
    app = runnerd.app(watch=True)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.status_screen
        await until(pilot, lambda: runner_names(screen) == ["r1"], "r1 listed")
        await runnerd.start("r2")
        await until(pilot, lambda: runner_names(screen) == ["r1", "r2"], "r2 listed by itself")
        assert runnerd.provider.events is not None
        runnerd.provider.record_event("slice.changed", "runnerd.slice", "MemoryMax 34G")
        await until(
            pilot, lambda: any("MemoryMax 34G" in e for e in screen.event_lines), "the event"
        )
        assert "slice.changed" in str(screen.query_one("#events").render())
        await pilot.press("w")
        assert not screen.watching and screen.sub_title == "paused"


async def test_a_applies_the_advice_on_y_only_and_records_it_as_sizing_apply_does(
    runnerd: Runnerd,
) -> None:
    app = runnerd.app(watch=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("s")
        sizing = screen_of(app, SizingScreen)
        await until(pilot, lambda: sizing.loads >= 1, "the advice")
        assert "a/b ci/t: 30 runs, largest peak 2G, needs 3G" in str(
            sizing.query_one("#evidence").render()
        )
        before = runnerd.config.read_text()
        await pilot.press("a", "n")  # n: nothing is written
        assert app.screen is sizing and sizing.message == "not applied"
        assert runnerd.config.read_text() == before and runnerd.reloads == []
        await pilot.press("a")
        assert isinstance(app.screen, ConfirmApply)
        assert "Apply node: memory 7G → 3G" in app.screen.question
        await pilot.press("y")
        await until(pilot, lambda: sizing.applies == 1, "the apply")
        assert sizing.message.startswith("applied node: memory 7G → 3G"), sizing.message
        # runnerd was asked to run with it at once, after the file was written
        assert sizing.message.endswith("runnerd runs with it now"), sizing.message
        assert len(runnerd.reloads) == 1 and 'memory = "3G"' in runnerd.reloads[0]
        await until(pilot, lambda: sizing.loads == 2, "the advice after the change")
        changes = str(sizing.query_one("#changes").render())
        assert "node: memory 7G → 3G (apply lower)" in changes
        assert "replaced memory 7G, slots 2, cpus 8" in changes
    text = runnerd.config.read_text()
    assert 'memory = "3G"   # each container\'s hard limit' in text and "# the build host" in text
    with ChangeLog(runnerd.db, read_only=True) as log:
        (change,) = log.changes("node")
    assert (change.source, change.old.memory, change.new.memory) == ("apply", 7 * G, 3 * G)
    events = EventLog(runnerd.db)
    try:
        (event,) = events.after(0)
    finally:
        events.close()
    assert (event.kind, event.data["source"]) == ("sizing.changed", "apply")


async def test_a_refused_apply_shows_the_check_s_problem_and_leaves_the_file_as_it_was(
    runnerd: Runnerd,
) -> None:
    app = runnerd.app(watch=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("s")
        sizing = screen_of(app, SizingScreen)
        await until(pilot, lambda: sizing.loads >= 1, "the advice")
        # Someone adds a profile after the advice was shown: node's change no longer fits.
        edited = runnerd.config.read_text() + (
            '\n[profiles.big]\ncommand = ["true"]\ncpus = 8\nmemory = "30G"\nslots = 1\n'
        )
        runnerd.config.write_text(edited)
        await pilot.press("a", "y")
        await until(pilot, lambda: sizing.applies == 1, "the refusal")
        assert sizing.message.startswith("refused, nothing written:\n"), sizing.message
        assert "more than the slice's MemoryMax of 33G" in sizing.message
        assert "more than the slice's MemoryMax of 33G" in str(
            sizing.query_one("#message").render()
        )
    assert runnerd.config.read_text() == edited
    with ChangeLog(runnerd.db, read_only=True) as log:
        assert log.changes("node") == []


async def test_job_detail_tells_the_admission_record_as_a_sentence_and_the_peaks(
    runnerd: Runnerd,
) -> None:
    await runnerd.start("r1", JobHint("octo/app", "ci", "build", "4242"))
    app = runnerd.app(watch=False)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.status_screen.refreshes >= 1, "the first status")
        await pilot.press("enter")
        job = screen_of(app, JobScreen)
        await until(pilot, lambda: job.loads == 1, "the record")
        assert job.text.startswith("job 4242: octo/app ci/build, runner r1 in profile node")
        assert "admitted by caps: reserved 7G, its profile's memory" in job.text
        assert "so far: memory peak 0B of its 7G cap, using 0B now" in job.text
        # A finished job from the Jobs screen: its peaks against its caps.
        await pilot.press("escape", "j")
        jobs = screen_of(app, JobsScreen)
        await until(pilot, lambda: jobs.loads == 1, "the jobs")
        assert len(jobs.entries) == 30 and jobs.entries[0]["id"] == "29"  # newest first
        await pilot.press("enter")
        finished = screen_of(app, JobScreen)
        await until(pilot, lambda: finished.loads == 1, "the finished record")
        assert finished.text.startswith("job 29: a/b ci/t, runner r29 in profile node: succeeded")
        assert (
            "peak 2G of its 7G cap\n" in finished.text and "CPU peak not measured" in finished.text
        )


def shown_columns(table: DataTable[str]) -> list[str]:
    return [str(c.label) for c in table.columns.values()]


def table_width(table: DataTable[str]) -> int:
    """The columns' width on screen, each cell's padding included."""
    return sum(c.get_render_width(table) for c in table.columns.values())


async def test_at_80_columns_every_screen_keeps_its_key_columns_whole_within_the_width(
    runnerd: Runnerd,
) -> None:
    await runnerd.start("r1", JobHint("octo/app", "ci", "build", "4242"))
    app = runnerd.app(watch=False)
    async with app.run_test(size=(80, 40)) as pilot:
        screen = app.status_screen
        await until(pilot, lambda: screen.refreshes >= 1, "the first status")
        table = screen.query_one("#runners", DataTable)
        assert {"RUNNER", "STATE", "RESERVED", "CAP", "JOB"} <= set(shown_columns(table))
        assert table_width(table) <= 78, shown_columns(table)
        assert screen.left_out and "CAP" not in screen.left_out
        assert table.get_row_at(0)[-1] == "octo/app ci/build"
        await pilot.press("s")
        sizing = screen_of(app, SizingScreen)
        await until(pilot, lambda: sizing.loads >= 1, "the advice")
        advice = sizing.query_one("#advice", DataTable)
        assert {"PROFILE", "NEED", "BUSY", "ADVICE"} <= set(shown_columns(advice))
        assert table_width(advice) <= 78, shown_columns(advice)
        assert advice.get_row_at(0)[-1] == "memory 7G → 3G"
        await pilot.press("escape", "j")
        jobs = screen_of(app, JobsScreen)
        await until(pilot, lambda: jobs.loads == 1, "the jobs")
        listed = jobs.query_one("#jobs", DataTable)
        assert {"REPOSITORY", "JOB", "CONCLUSION", "DURATION"} <= set(shown_columns(listed))
        assert table_width(listed) <= 78, shown_columns(listed)
        conclusion = shown_columns(listed).index("CONCLUSION")
        assert listed.get_row_at(0)[conclusion] == "succeeded"


async def test_a_wider_terminal_shows_the_columns_a_narrow_one_left_out(runnerd: Runnerd) -> None:
    await runnerd.start("r1", JobHint("octo/app", "ci", "build", "4242"))
    app = runnerd.app(watch=False)
    async with app.run_test(size=(80, 40)) as pilot:
        screen = app.status_screen
        await until(pilot, lambda: screen.refreshes >= 1, "the first status")
        assert screen.left_out
        await pilot.resize_terminal(160, 40)
        await until(pilot, lambda: not screen.left_out, "every column shown at 160")
        assert len(shown_columns(screen.query_one("#runners", DataTable))) == 9


async def test_an_unreachable_socket_is_named_with_how_to_start_runnerd(tmp_path: Path) -> None:
    socket = tmp_path / "runnerd.sock"
    app = RunnerctlApp(Source(str(tmp_path / "runnerd.toml"), str(socket)), watch=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.status_screen
        await until(pilot, lambda: screen.refreshes >= 1, "the first attempt")
        assert screen.problem.startswith(f"runnerd does not answer on {socket}")
        assert f"runnerd serve -c {tmp_path / 'runnerd.toml'}" in screen.problem
        assert "runnerd does not answer" in str(screen.query_one("#problem").render())
        await pilot.press("q")


def test_runnerctl_loads_textual_only_for_tui() -> None:
    code = "import sys, runnerd.ctl; print('textual' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "False", out.stderr


def test_runnerctl_tui_opens_on_the_config_s_socket_and_refuses_a_zero_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import runnerd.tui
    from runnerd.ctl import main

    path = tmp_path / "runnerd.toml"
    path.write_text(CONFIG.format(state=tmp_path, db=tmp_path / "history.db"))
    opened: list[tuple[str, str, float, bool]] = []

    def run_tui(config: str, socket: str, interval: float, watch: bool) -> int:
        opened.append((config, socket, interval, watch))
        return 0

    monkeypatch.setattr(runnerd.tui, "run_tui", run_tui)
    assert main(["-c", str(path), "tui", "--interval", "0.5"]) == 0
    assert main(["-c", str(path), "--socket", "/run/r.sock", "tui", "--no-watch"]) == 0
    assert opened == [
        (str(path), str(tmp_path / "runnerd.sock"), 0.5, True),
        (str(path), "/run/r.sock", 2.0, False),
    ]
    assert main(["-c", str(path), "tui", "--interval", "0"]) == 2


def test_the_evidence_counts_agree_with_their_nouns() -> None:
    from runnerd.admission.model import Policy
    from runnerd.history import JobKey
    from runnerd.sizing.advise import JobSizing, ProfileAdvice
    from runnerd.tui.sizing import EVIDENCE_JOBS, evidence

    key = JobKey("node", "octo/app", "ci", "build")
    one = JobSizing(key, 1, G, 2 * G, False, 0, 0, None)
    advice = ProfileAdvice(
        "node", Policy.CAPS, 7 * G, 2, 9, G, G, G, jobs=(one,) * (EVIDENCE_JOBS + 1)
    )
    text = evidence(advice)
    assert "octo/app ci/build: 1 run," in text
    assert text.endswith("and 1 more job")
