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
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

EXIT_FORCED = 130  # 128 + SIGINT, what a shell reports for a command ended by Ctrl-C
EXIT_STOP_TIMED_OUT = 1  # the stop did not end within its bound: ended at once, not cleanly
SIGNALS = (signal.SIGINT, signal.SIGTERM)
# rungar demo also stops on SIGHUP: its terminal closed. Its output then goes nowhere.
WITH_HANGUP = (*SIGNALS, signal.SIGHUP)


def stop_on_signals(
    stop: asyncio.Event,
    *,
    at_once: Callable[[], None] | None = None,
    note: str = "",
    signals: tuple[signal.Signals, ...] = SIGNALS,
    within: float | None = None,
) -> None:
    """On the running loop: the first of ``signals`` (SIGINT or SIGTERM) sets ``stop``; a second
    calls ``at_once`` and exits the process with 130. ``note`` is printed to stderr on the first
    (for commands run at a terminal: "stopping; press Ctrl-C again to stop at once"). After a
    SIGHUP the terminal is gone: stdout and stderr go to /dev/null, so what the command still
    prints on its way out cannot fail it.

    ``within`` (seconds) bounds the stop: a command still running that long after the first
    signal says so, calls ``at_once`` and exits with 1, whatever it was waiting for. The bound
    is kept by a thread of its own, so a loop that no longer runs cannot hold it up."""
    loop = asyncio.get_running_loop()
    asked = 0

    def end_at_once(code: int) -> None:
        if at_once is not None:
            with contextlib.suppress(Exception):
                at_once()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)

    def timed_out() -> None:
        with contextlib.suppress(Exception):
            print(
                f"did not stop within {within:g} s of being asked: stopped at once",
                file=sys.stderr,
                flush=True,
            )
        end_at_once(EXIT_STOP_TIMED_OUT)

    def handle(signum: int) -> None:
        nonlocal asked
        if signum == signal.SIGHUP:
            _to_nowhere()
        asked += 1
        if asked == 1:
            if note:
                print(note, file=sys.stderr, flush=True)
            if within is not None:
                watchdog = threading.Timer(within, timed_out)
                watchdog.daemon = True  # a stop that ends in time ends the process with it
                watchdog.start()
            stop.set()
            return
        end_at_once(EXIT_FORCED)

    for signum in signals:
        with contextlib.suppress(NotImplementedError, RuntimeError):  # not the main thread
            loop.add_signal_handler(signum, handle, signum)


async def within(awaitable: Awaitable[T], seconds: float | None, what: str = "") -> T:
    """``awaitable``'s answer, or TimeoutError after ``seconds`` (None: no bound); with
    ``what``, the error says what timed out and after how long ("List timed out after 10 s").
    Unlike ``asyncio.wait_for`` of Python 3.11, a task cancelled just as the answer arrives
    stays cancelled: wait_for returns the answer and drops the cancel, and a loop that runs
    such a call (the lease keeper) then never ends, holding up the daemon's stop."""
    try:
        async with asyncio.timeout(seconds):
            return await awaitable
    except TimeoutError as e:
        if not what or seconds is None:
            raise
        raise TimeoutError(timed_out(what, seconds)) from e


def timed_out(what: str, seconds: float) -> str:
    """ "List timed out after 10 s": what timed out, and after how long."""
    return f"{what} timed out after {seconds:g} s"


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


def exit_until_serving(*, unwound: bool = True) -> Callable[[], None]:
    """Before anything is started (settings read, modules imported): SIGINT or SIGTERM ends the
    command at once with 0, as there is nothing to stop yet. :func:`stop_on_signals` takes the
    signals over once the loop runs. Returns what puts the previous handlers back.

    ``unwound`` (the default) raises SystemExit where the command stands, so its ``finally``
    blocks run; a command that makes nothing before its loop runs passes False and leaves
    without unwinding: SystemExit raised into an import or a class body comes out as another
    error (a RuntimeError from a dataclass field) and a traceback instead of exit 0."""

    def leave(signum: int, frame: object) -> None:
        if unwound:
            raise SystemExit(0)
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(0)

    before: dict[int, Any] = {}
    for signum in SIGNALS:
        with contextlib.suppress(ValueError):  # not the main thread: the caller handles them
            before[signum] = signal.signal(signum, leave)

    def restore() -> None:
        for signum, handler in before.items():
            signal.signal(signum, handler)

    return restore
