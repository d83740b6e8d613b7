"""The Jobs screen (``runnerctl jobs --since 7d``) and job detail (``runnerctl job ID``).

Job detail is the job's record as ``runnerctl job`` prints it — what it was, how it ended with
its memory peak and average CPU, the admission record as a sentence and its waits — then its
CPU peak. For a job still running, the runner's own figures from the status screen say what it
holds so far.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from rungar.errors import ConfigError
from rungar.model.units import format_bytes
from runnerd.cli_jobs import COLUMNS, job_cells
from runnerd.sentences import job_sentence
from runnerd.tui.fit import fill_table
from runnerd.tui.source import Clock, Source

# Left out first at a narrow terminal: job detail (Enter) shows them all.
DROP = ("RUNNER", "ID", "PEAK CPU", "WAITED", "WORKFLOW", "PEAK MEM", "STARTED")


def peaks(row: dict[str, Any], runner: dict[str, Any] | None) -> str:
    """What ``runnerctl job`` leaves out: the CPU peak, and while the job runs, what its runner
    holds so far (its peaks are recorded when it ends)."""
    if row["result"] is None:
        if runner is None:
            return "running: its peaks are recorded when it ends"
        return (
            f"so far: memory peak {format_bytes(runner['peak'])} of its "
            f"{format_bytes(row['cap_memory'])} cap, using {format_bytes(runner['used'])} now"
        )
    if row["peak_cpu"] is None:
        return "CPU peak not measured"
    return f"CPU peak {row['peak_cpu']:.2f} of its {row['cap_cpus']:g} CPUs"


class JobScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("q", "app.quit", "Quit"),
    ]
    DEFAULT_CSS = "#record { padding: 1 2; }"

    def __init__(self, source: Source, ident: str, runner: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.source = source
        self.ident = ident
        self.runner = runner
        self.text = ""
        self.loads = 0  # records shown so far; tests wait on it instead of the clock

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll():
            yield Static(f"reading job {self.ident}…", id="record")
        yield Footer()

    def on_mount(self) -> None:
        self.title = f"job {self.ident}"
        self.load()

    @work(exclusive=True)
    async def load(self) -> None:
        try:
            row = await asyncio.to_thread(self.source.job, self.ident)
        except ConfigError as e:
            text = "\n".join(e.problems)
        except OSError as e:
            text = str(e)
        else:
            if row is None:
                text = f"no job {self.ident} in the job history"
            else:
                self.title = f"job {row['job_id'] or row['id']}"
                text = job_sentence(row) + "\n" + peaks(row, self.runner)
        self.text = text
        self.query_one("#record", Static).update(text)
        self.loads += 1


class JobsScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        # priority: the table would take Enter itself and the footer would not list it
        Binding("enter", "job", "Job detail", priority=True),
        Binding("r", "reload", "Reload"),
        Binding("escape", "app.pop_screen", "Back"),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(self, source: Source, clock: Clock) -> None:
        super().__init__()
        self.source = source
        self.clock = clock
        self.entries: list[dict[str, Any]] = []
        self.loads = 0
        self.left_out: list[str] = []  # the columns the terminal's width left out

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="note")
        table: DataTable[str] = DataTable(id="jobs", cursor_type="row")
        table.add_columns(*COLUMNS)
        yield table
        yield Footer()

    def on_mount(self) -> None:
        self.title = "runnerd jobs, the last 7 days"
        self.load()

    def action_reload(self) -> None:
        self.load()

    @work(exclusive=True)
    async def load(self) -> None:
        note = ""
        try:
            self.entries = await asyncio.to_thread(self.source.jobs, self.clock())
        except ConfigError as e:
            self.entries, note = [], "\n".join(e.problems)
        except OSError as e:
            self.entries, note = [], str(e)
        self._fill()
        if not note and not self.entries:
            note = "no jobs recorded in the last 7 days"
        self.query_one("#note", Static).update(note)
        self.loads += 1

    def _fill(self) -> None:
        table: DataTable[str] = self.query_one("#jobs", DataTable)
        self.left_out = fill_table(table, COLUMNS, [job_cells(e) for e in self.entries], DROP)

    def on_resize(self) -> None:
        if self.entries:
            self._fill()

    def action_job(self) -> None:
        row = self.query_one("#jobs", DataTable).cursor_row
        if row < len(self.entries):
            self.app.push_screen(JobScreen(self.source, str(self.entries[row]["id"])))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()  # a click on the selected row
        self.action_job()
