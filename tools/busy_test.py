"""Run a command several times in a row beside busy loops, as on a machine where others build.

``make test-busy`` runs ``make test`` three times beside two busy loops (one per CPU of the
project's 2-core machine): a test that needs a quiet machine fails here rather than in someone's
CI. The loops are killed however the runs end (a failure, Ctrl-C, SIGTERM, SIGHUP), and on Linux
they also die with this process if it is killed outright. It prints each run's time and the load
average before and after, the figures docs/benchmarks.md records; it exits with the first failing
run's code, 0 when every run passed. Needs only python3.

    python3 tools/busy_test.py --loops 2 --runs 3 -- make test
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from types import FrameType

BUSY = "while True:\n    pass\n"


def _die_with_parent() -> None:
    """In the child: be sent SIGKILL when this process ends, however it ends (Linux only)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@contextlib.contextmanager
def busy_loops(count: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    loops: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(count):
            loops.append(
                subprocess.Popen(  # noqa: S603 (this interpreter, a fixed program)
                    [sys.executable, "-c", BUSY], preexec_fn=_die_with_parent
                )
            )
        yield loops
    finally:
        for loop in loops:
            with contextlib.suppress(ProcessLookupError):
                loop.kill()
        for loop in loops:
            loop.wait()


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def _stop(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--loops", type=int, default=2, help="busy loops (default 2)")
    parser.add_argument("--runs", type=int, default=3, help="runs in a row (default 3)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("name the command to run after --")
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _stop)
    with busy_loops(args.loops):
        print(f"busy-test: {args.loops} busy loops; load average {load()}", flush=True)
        for run in range(1, args.runs + 1):
            started = time.monotonic()
            code = subprocess.call(command)  # noqa: S603 (the user's own command)
            took = time.monotonic() - started
            print(
                f"busy-test: run {run} of {args.runs}: exit {code} in {took:.0f} s; "
                f"load average {load()}",
                flush=True,
            )
            if code != 0:
                return code
    print(f"busy-test: {args.runs} runs in a row passed beside {args.loops} busy loops")
    return 0


if __name__ == "__main__":
    sys.exit(main())
