"""The status screen: the budget, the host line, the queue and each runner, as ``runnerctl
status`` prints them, and in watch mode refreshed live with runnerd's events beside them.

Watch mode asks ``GET /status`` every ``interval`` (2 s, as ``runnerctl watch``) and follows
``GET /events`` by long poll: each event is listed and refreshes the status at once. Without
an answer from runnerd the screen says where it asked and how to start runnerd, and keeps
asking while watching, so it comes back by itself once runnerd runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import DataTable, Footer, Header, Static

from rungar.model.units import format_bytes
from runnerd.sentences import queue_lines, render_event
from runnerd.tui.fit import fill_table
from runnerd.tui.source import Source, Unreachable

T = TypeVar("T")


@runtime_checkable
class Screens(Protocol):
    """The screens the status screen opens (:class:`runnerd.tui.app.RunnerctlApp`'s)."""

    def show_sizing(self) -> None: ...

    def show_jobs(self) -> None: ...

    def show_job(self, ident: str, runner: dict[str, Any] | None = None) -> None: ...


COLUMNS = ("RUNNER", "PROFILE", "SCALE SET", "STATE", "RESERVED", "USED", "PEAK", "CAP", "JOB")
# Left out first at a narrow terminal: the job detail names the profile and scale set.
DROP = ("SCALE SET", "PROFILE", "PEAK", "USED")
EVENTS_SHOWN = 8  # the newest events listed under the runners
EVENTS_WAIT = 25.0  # how long one long poll of GET /events waits for a new event


def runner_cells(r: dict[str, Any]) -> tuple[str, ...]:
    return (
        r["name"],
        r["profile"],
        r["scale_set"],
        r["state"],
        format_bytes(r["counted"]),
        format_bytes(r["used"]),
        format_bytes(r["peak"]),
        format_bytes(r["cap"]),
        r["job"] or "-",
    )


class StatusScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        # priority: the table would take Enter itself and the footer would not list it
        Binding("enter", "job", "Job detail", priority=True),
        Binding("w", "toggle_watch", "Watch on/off"),
        Binding("r", "refresh", "Refresh"),
        Binding("s", "sizing", "Sizing"),
        Binding("j", "jobs", "Jobs"),
        Binding("q", "app.quit", "Quit"),
    ]
    DEFAULT_CSS = """
    #problem { color: $error; padding: 0 1; }
    #lines { padding: 0 1; height: auto; }
    #runners { height: 1fr; }
    #events { height: auto; max-height: 10; padding: 0 1; color: $text-muted; }
    """

    def __init__(
        self, source: Source, watch: bool, interval: float, events_wait: float = EVENTS_WAIT
    ) -> None:
        super().__init__()
        self.source = source
        self.watching = watch
        self.interval = interval
        self.events_wait = events_wait
        self.runners: list[dict[str, Any]] = []
        self.problem = ""
        self.event_lines: list[str] = []
        self.refreshes = 0  # answers shown so far; tests wait on it instead of the clock
        self._timer: Timer | None = None
        self._asking = False  # a GET /status is in flight
        self._again = False  # and another was asked for meanwhile
        self.left_out: list[str] = []  # the columns the terminal's width left out

    @property
    def rapp(self) -> Screens:
        assert isinstance(self.app, Screens)
        return self.app

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical():
            yield Static("", id="problem")
            yield Static("asking runnerd…", id="lines")
            table: DataTable[str] = DataTable(id="runners", cursor_type="row")
            table.add_columns(*COLUMNS)
            yield table
            yield Static("", id="events")
        yield Footer()

    def on_mount(self) -> None:
        self._set_title()
        self.refresh_status()
        if self.watching:
            self._start_watching()

    def _set_title(self) -> None:
        self.title = "runnerd"
        self.sub_title = f"watching, every {self.interval:g}s" if self.watching else "paused"

    def _start_watching(self) -> None:
        self._timer = self.set_interval(self.interval, self.refresh_status)
        self.follow_events()

    def action_toggle_watch(self) -> None:
        self.watching = not self.watching
        if self.watching:
            self._start_watching()
            self.refresh_status()
        else:
            if self._timer is not None:
                self._timer.stop()
                self._timer = None
            self.workers.cancel_group(self, "events")
        self._set_title()

    def action_refresh(self) -> None:
        self.refresh_status()

    def action_sizing(self) -> None:
        self.rapp.show_sizing()

    def action_jobs(self) -> None:
        self.rapp.show_jobs()

    def action_job(self) -> None:
        table = self.query_one("#runners", DataTable)
        if not self.runners or table.cursor_row >= len(self.runners):
            self.notify("no runner selected")
            return
        runner = self.runners[table.cursor_row]
        if runner.get("row") is None:
            self.notify(f"{runner['name']} has no job record yet")
            return
        self.rapp.show_job(str(runner["row"]), runner)

    def refresh_status(self) -> None:
        """Ask for the status, or once more after the question in flight: a slow answer is
        never cancelled by the next tick, so a slow runnerd still shows each answer."""
        if self._asking:
            self._again = True
            return
        self._asking = True
        self._ask()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()  # a click on the selected row
        self.action_job()

    @work(group="status")
    async def _ask(self) -> None:
        try:
            again = True
            while again:
                self._again = False
                try:
                    status = await self.source.status()
                except Unreachable as e:
                    shown = self._shown(self.show_unreachable, str(e))
                else:
                    shown = self._shown(self.show, status)
                if not shown:
                    return
                self.refreshes += 1
                again = self._again
        finally:
            self._asking = False

    def _shown(self, show: Callable[[T], None], what: T) -> bool:
        """Show an answer; False when it came after the app began to quit and took the
        screen's widgets away."""
        try:
            show(what)
        except NoMatches:
            return False
        return True

    def show_unreachable(self, message: str) -> None:
        self.problem = message
        self.runners = []
        self.query_one("#problem", Static).update(message)
        self.query_one("#lines", Static).update("")
        self.query_one("#runners", DataTable).clear()

    def show(self, status: dict[str, Any]) -> None:
        self.problem = ""
        self.query_one("#problem", Static).update("")
        lines = [status["budget"]] + [status[k] for k in ("host", "cpu") if status.get(k)]
        lines.extend(queue_lines(status.get("queue") or []))
        if not status["runners"]:
            lines.append("no runners")
        self.query_one("#lines", Static).update("\n".join(lines))
        self.runners = list(status["runners"])
        self._fill()

    def _fill(self) -> None:
        table: DataTable[str] = self.query_one("#runners", DataTable)
        rows = [runner_cells(r) for r in self.runners]
        keys = [r["name"] for r in self.runners]
        self.left_out = fill_table(table, COLUMNS, rows, DROP, keys)

    def on_resize(self) -> None:
        if self.runners:
            self._fill()

    @work(exclusive=True, group="events")
    async def follow_events(self) -> None:
        """List the newest events runnerd kept, then each new one as it comes; a new one
        refreshes the status at once."""
        after = 0
        self.event_lines = []  # listed again from the start when watching resumes
        caught_up = False  # asked without waiting until nothing older was left
        while self.watching:
            try:
                found = await self.source.events(after, self.events_wait if caught_up else 0.0)
            except Unreachable:
                # The status refresh says so; ask again at the next interval.
                await asyncio.sleep(self.interval)
                continue
            for event in found:
                after = max(after, int(event["id"]))
                self.event_lines = [*self.event_lines, render_event(event)][-EVENTS_SHOWN:]
            if found and not self._shown(self._show_events, self.event_lines):
                return
            if found and caught_up:
                self.refresh_status()
            caught_up = caught_up or not found

    def _show_events(self, lines: list[str]) -> None:
        self.query_one("#events", Static).update("\n".join(lines))
