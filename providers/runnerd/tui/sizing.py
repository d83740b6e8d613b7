"""The Sizing screen: ``runnerctl sizing``'s advice per profile with its evidence, and ``a`` to
apply the selected profile's advice.

``a`` asks first, then writes through ``runnerctl sizing apply``'s own function: the advice
worked out again from the history against the config as it is on disk at that moment, the same
check as any config, the change recorded in the history and sent as a ``sizing.changed``
event. When the check refuses, the screen lists its problems and the file is left as it was.
"""

from __future__ import annotations

import asyncio
import time
from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container, Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Footer, Header, Static

from rungar.errors import ConfigError
from rungar.model.columns import plural
from rungar.model.units import format_bytes
from runnerd.sizing.advise import ProfileAdvice
from runnerd.sizing.report import SizingReport
from runnerd.tui.fit import fill_table
from runnerd.tui.source import Clock, Source, Unreachable

COLUMNS = (
    "PROFILE", "MEMORY", "SLOTS", "RUNS", "PEAK P50", "PEAK P95", "PEAK MAX", "NEED",
    "WAIT P95", "BUSY", "ADVICE",
)  # fmt: skip
# Left out first at a narrow terminal: the evidence under the table tells the peaks and runs.
DROP = ("PEAK P50", "PEAK MAX", "RUNS", "WAIT P95", "PEAK P95", "MEMORY", "SLOTS")
CHANGES_SHOWN = 5  # the newest sizing changes listed, each with what it replaced
EVIDENCE_JOBS = 8  # the jobs listed under the selected profile, heaviest need first


def advice_cells(a: ProfileAdvice) -> tuple[str, ...]:
    def peak(value: int) -> str:
        return format_bytes(value) if a.runs else "-"

    if a.applicable and a.new_memory is not None and a.new_slots is not None:
        advice = proposal(a)
    else:
        advice = a.action.value.replace("_", " ")
    return (
        a.profile,
        format_bytes(a.memory),
        str(a.slots),
        str(a.runs),
        peak(a.p50),
        peak(a.p95),
        peak(a.largest),
        format_bytes(a.need) if a.need else "-",
        f"{a.wait_p95:.0f}s",
        f"{a.busy:.0%}",
        advice,
    )


def proposal(a: ProfileAdvice) -> str:
    """What applying writes: ``memory 7G → 3G, slots 2 → 4``."""
    parts = []
    if a.new_memory is not None and a.new_memory != a.memory:
        parts.append(f"memory {format_bytes(a.memory)} → {format_bytes(a.new_memory)}")
    if a.new_slots is not None and a.new_slots != a.slots:
        parts.append(f"slots {a.slots} → {a.new_slots}")
    return ", ".join(parts)


def evidence(a: ProfileAdvice) -> str:
    """The advice line, then the jobs it rests on, heaviest need first."""
    lines = [f"{a.profile}: {a.line}"]
    for job in sorted(a.jobs, key=lambda j: j.need, reverse=True)[:EVIDENCE_JOBS]:
        key = job.key
        line = (
            f"  {key.repository} {key.workflow}/{key.job}: {plural(job.runs, 'run')}, "
            f"largest peak {format_bytes(job.largest)}, needs {format_bytes(job.need)}"
        )
        if job.on_cap:
            line += ", on its cap"
        if job.need_at_larger is not None:
            line += f", needed {format_bytes(job.need_at_larger)} at larger caps"
        lines.append(line)
    if len(a.jobs) > EVIDENCE_JOBS:
        lines.append(f"  and {plural(len(a.jobs) - EVIDENCE_JOBS, 'more job', 'more jobs')}")
    return "\n".join(lines)


def changes_text(report: SizingReport) -> str:
    """The newest changes written, each with what it replaced, as ``runnerctl sizing`` lists
    them."""
    if not report.changes:
        return ""
    lines = ["Changes, newest first:"]
    for c in list(reversed(report.changes))[:CHANGES_SHOWN]:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(c.at))
        lines.append(f"  {when}  {c.describe()}; replaced {c.old.describe()}")
    if len(report.changes) > CHANGES_SHOWN:
        lines.append(f"  and {len(report.changes) - CHANGES_SHOWN} older (runnerctl sizing)")
    return "\n".join(lines)


class ConfirmApply(ModalScreen[bool]):
    """``y`` applies, ``n`` or Escape does not."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Apply"),
        Binding("n,escape", "answer(False)", "Cancel"),
    ]
    DEFAULT_CSS = """
    #middle { align: center middle; height: 1fr; }
    #question { width: 72; height: auto; border: thick $warning; padding: 1 2;
                background: $surface; }
    """

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Container(id="middle"):
            yield Static(self.question + "\n\n[b]y[/b] apply   [b]n[/b] cancel", id="question")
        yield Footer()

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class SizingScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "apply", "Apply advice"),
        Binding("r", "reload", "Reload"),
        Binding("escape", "app.pop_screen", "Back"),
        Binding("q", "app.quit", "Quit"),
    ]
    DEFAULT_CSS = """
    #summary, #evidence, #message, #changes { padding: 0 1; height: auto; }
    #changes { color: $text-muted; }
    #advice { height: auto; max-height: 50%; }
    #message { color: $warning; }
    """

    def __init__(self, source: Source, clock: Clock) -> None:
        super().__init__()
        self.source = source
        self.clock = clock
        self.report: SizingReport | None = None
        self.message = ""
        self.loads = 0  # reports shown so far; tests wait on it instead of the clock
        self.applies = 0  # applies answered (written or refused)
        self.left_out: list[str] = []  # the columns the terminal's width left out

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical():
            yield Static("reading the job history…", id="summary")
            table: DataTable[str] = DataTable(id="advice", cursor_type="row")
            table.add_columns(*COLUMNS)
            yield table
            yield Static("", id="evidence")
            yield Static("", id="message")
            yield Static("", id="changes")
        yield Footer()

    def on_mount(self) -> None:
        self.title = "runnerd sizing"
        self.sub_title = self.source.config_path
        self.load()

    def action_reload(self) -> None:
        self.load()

    @work(exclusive=True, group="sizing")
    async def load(self) -> None:
        try:
            report = await asyncio.to_thread(self.source.sizing, self.clock())
        except ConfigError as e:
            self.say("\n".join(e.problems))
        except (OSError, ValueError) as e:
            self.say(f"runnerctl sizing: {e}")
        else:
            self.show(report)
        self.loads += 1

    def show(self, report: SizingReport) -> None:
        self.report = report
        budget = format_bytes(report.memory_max) if report.memory_max else "none"
        summary = [f"MemoryMax {budget}. Need = largest peak + the margin, at least 1G."]
        summary += list(report.notes)
        self.query_one("#summary", Static).update("\n".join(summary))
        self.query_one("#changes", Static).update(changes_text(report))
        self._fill()
        self._show_evidence()

    def _fill(self) -> None:
        advice = self.report.advice if self.report else []
        table: DataTable[str] = self.query_one("#advice", DataTable)
        rows = [advice_cells(a) for a in advice]
        keys = [a.profile for a in advice]
        self.left_out = fill_table(table, COLUMNS, rows, DROP, keys)

    def on_resize(self) -> None:
        if self.report is not None:
            self._fill()

    def say(self, message: str) -> None:
        self.message = message
        self.query_one("#message", Static).update(message)

    def selected(self) -> ProfileAdvice | None:
        if self.report is None or not self.report.advice:
            return None
        row = self.query_one("#advice", DataTable).cursor_row
        return self.report.advice[min(row, len(self.report.advice) - 1)]

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_evidence()

    def _show_evidence(self) -> None:
        advice = self.selected()
        self.query_one("#evidence", Static).update(evidence(advice) if advice else "")

    def action_apply(self) -> None:
        advice = self.selected()
        if advice is None:
            self.say("no profile selected")
            return
        if not advice.applicable:
            self.say(f"{advice.profile}: nothing to apply: {advice.line}")
            return
        question = (
            f"Apply {advice.profile}: {proposal(advice)} to {self.source.config_path}?\n"
            "The advice is worked out again from the file as it is now and checked as any "
            "config is; runnerd runs with it at once, as after the dashboard's Apply."
        )

        def answered(yes: bool | None) -> None:
            if yes:
                self.apply(advice.profile)
            else:
                self.say("not applied")

        self.app.push_screen(ConfirmApply(question), answered)

    async def _reload(self) -> str:
        """Have runnerd run with the file now, through the call the dashboard's save makes."""
        try:
            problems = await self.source.reload()
        except Unreachable:
            return "runnerd does not answer: it runs with it once started or reloaded"
        if problems:
            return "runnerd kept its config: " + "; ".join(problems)
        return "runnerd runs with it now"

    @work(exclusive=True, group="apply")
    async def apply(self, profile: str) -> None:
        try:
            change = await asyncio.to_thread(self.source.apply, profile, self.clock())
        except ConfigError as e:
            self.say("refused, nothing written:\n" + "\n".join(e.problems))
        except (OSError, ValueError) as e:
            self.say(f"not applied: {e}")
        else:
            self.say(f"applied {change.describe()}\n{await self._reload()}")
            self.load()
        self.applies += 1
