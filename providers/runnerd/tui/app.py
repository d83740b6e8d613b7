"""The ``runnerctl tui`` application: the status screen first, the others pushed over it.

Keys: on the status screen ``Enter`` opens the selected runner's job, ``s`` the Sizing screen,
``j`` the Jobs screen, ``w`` turns watch mode on and off, ``r`` refreshes; ``Escape`` goes back
and ``q`` quits everywhere. The footer lists the keys of the screen shown.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

from textual.app import App
from textual.binding import Binding, BindingType

from runnerd.tui.jobs import JobScreen, JobsScreen
from runnerd.tui.sizing import SizingScreen
from runnerd.tui.source import Clock, Source
from runnerd.tui.status import EVENTS_WAIT, StatusScreen

WATCH_INTERVAL = 2.0  # seconds between status refreshes in watch mode, as runnerctl watch


class RunnerctlApp(App[None]):
    TITLE = "runnerd"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("q", "quit", "Quit")]

    def __init__(
        self,
        source: Source,
        watch: bool = True,
        interval: float = WATCH_INTERVAL,
        clock: Clock = time.time,
        events_wait: float = EVENTS_WAIT,
    ) -> None:
        super().__init__()
        self.source = source
        self.clock = clock
        self.status_screen = StatusScreen(source, watch, interval, events_wait)

    def on_mount(self) -> None:
        self.push_screen(self.status_screen)

    def show_sizing(self) -> None:
        self.push_screen(SizingScreen(self.source, self.clock))

    def show_jobs(self) -> None:
        self.push_screen(JobsScreen(self.source, self.clock))

    def show_job(self, ident: str, runner: dict[str, Any] | None = None) -> None:
        self.push_screen(JobScreen(self.source, ident, runner))
