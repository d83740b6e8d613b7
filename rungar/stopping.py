"""How every long-running command stops: ``rungar serve``, ``rungar demo``, ``rungar
github-emulator``, ``runnerd serve`` and the provider plugins (docs/commands.md, "Stopping").

The first SIGINT (Ctrl-C) or SIGTERM asks the command to stop: it stops the processes it
started, removes what it created (sockets, temporary folders, cgroups) and exits 0, within
10 seconds. A second one while it is stopping ends it at once with exit code 130: what it
started is sent SIGTERM on the way out (``at_once``), and is left to stop by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

EXIT_FORCED = 130  # 128 + SIGINT, what a shell reports for a command ended by Ctrl-C
SIGNALS = (signal.SIGINT, signal.SIGTERM)
# rungar demo also stops on SIGHUP: its terminal closed. Its output then goes nowhere.
WITH_HANGUP = (*SIGNALS, signal.SIGHUP)


def stop_on_signals(
    stop: asyncio.Event,
    *,
    at_once: Callable[[], None] | None = None,
    note: str = "",
    signals: tuple[signal.Signals, ...] = SIGNALS,
) -> None:
    """On the running loop: the first of ``signals`` (SIGINT or SIGTERM) sets ``stop``; a second
    calls ``at_once`` and exits the process with 130. ``note`` is printed to stderr on the first
    (for commands run at a terminal: "stopping; press Ctrl-C again to stop at once"). After a
    SIGHUP the terminal is gone: stdout and stderr go to /dev/null, so what the command still
    prints on its way out cannot fail it."""
    loop = asyncio.get_running_loop()
    asked = 0

    def handle(signum: int) -> None:
        nonlocal asked
        if signum == signal.SIGHUP:
            _to_nowhere()
        asked += 1
        if asked == 1:
            if note:
                print(note, file=sys.stderr, flush=True)
            stop.set()
            return
        if at_once is not None:
            with contextlib.suppress(Exception):
                at_once()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(EXIT_FORCED)

    for signum in signals:
        with contextlib.suppress(NotImplementedError, RuntimeError):  # not the main thread
            loop.add_signal_handler(signum, handle, signum)


def _to_nowhere() -> None:
    """Point stdout and stderr at /dev/null (their terminal hung up)."""
    with contextlib.suppress(OSError):
        nowhere = os.open(os.devnull, os.O_WRONLY)
        for fd in (1, 2):
            os.dup2(nowhere, fd)
        os.close(nowhere)


def terminate_group(pid: int | None) -> None:
    """SIGTERM to ``pid``'s process group (a child started in its own session), or to it."""
    if pid is None:
        return
    try:
        os.killpg(pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)


def signal_free_server(config: Any) -> Any:
    """A ``uvicorn.Server`` for ``config`` that leaves SIGINT and SIGTERM to the command: the
    stock one takes them over while it serves and raises them again when it ends, which would
    count as a second Ctrl-C."""
    import uvicorn

    class SignalFreeServer(uvicorn.Server):
        def capture_signals(self) -> contextlib.AbstractContextManager[None]:  # type: ignore[override]  # uvicorn declares a generator
            return contextlib.nullcontext()

    return SignalFreeServer(config)


def exit_until_serving() -> Callable[[], None]:
    """Before anything is started (settings read, modules imported): SIGINT or SIGTERM ends the
    command at once with 0, as there is nothing to stop yet. :func:`stop_on_signals` takes the
    signals over once the loop runs. Returns what puts the previous handlers back."""

    def leave(signum: int, frame: object) -> None:
        raise SystemExit(0)

    before: dict[int, Any] = {}
    for signum in SIGNALS:
        with contextlib.suppress(ValueError):  # not the main thread: the caller handles them
            before[signum] = signal.signal(signum, leave)

    def restore() -> None:
        for signum, handler in before.items():
            signal.signal(signum, handler)

    return restore
