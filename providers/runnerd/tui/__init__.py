"""``runnerctl tui``: runnerd's status, watch mode, Sizing with ``a`` to apply, and job detail,
full-screen in a terminal (docs/runnerd.md, "runnerctl tui").

Textual is imported only here and below, and runnerctl imports this package only for ``tui``,
so the other runnerctl commands do not pay for it.
"""

from __future__ import annotations


def run_tui(config_path: str, socket: str, interval: float, watch: bool) -> int:
    from runnerd.tui.app import RunnerctlApp
    from runnerd.tui.source import Source

    RunnerctlApp(Source(config_path, socket), watch=watch, interval=interval).run()
    return 0
