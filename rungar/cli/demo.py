"""``rungar demo`` (= ``make demo``): the embedded default, on loopback, with no account.

It starts a GitHub emulator, three runnerd hosts with different memory budgets, AWS on moto's
server for overflow, and the rungar daemon; queues a burst of jobs whose runners really
allocate memory; shows ``rungar status`` live; and ends with a summary. ``--keep`` leaves it
running for ``rungar status`` in another shell. ``--placement-only`` replays the Placement
README's two placement examples through the placement engine on a virtual clock instead.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import sys
from typing import Any


def add_parser(subparsers: Any, name: str, help_text: str) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(name, help=help_text)
    parser.add_argument("--keep", action="store_true", help="leave it running after the summary")
    parser.add_argument(
        "--placement-only",
        action="store_true",
        help="only replay the placement examples on a virtual clock",
    )
    parser.add_argument("--small", type=int, default=28, help="small jobs in the burst")
    parser.add_argument("--large", type=int, default=4, help="large jobs in the burst")
    parser.add_argument("--no-live", action="store_true", help="no live view, only the summary")
    parser.add_argument(
        "--example",
        metavar="NAME",
        help="run one of examples/ instead (01-single-host, 02-sizes-with-priority, …)",
    )


# What the demo's AWS needs beyond Rungar itself: the `demo` extra (moto's server, boto3).
DEMO_EXTRA = ("moto.server", "boto3")


def missing_demo_extra() -> str:
    """The module of the ``demo`` extra this installation lacks, or ''."""
    for module in DEMO_EXTRA:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as e:
            return e.name or module
    return ""


def run(args: argparse.Namespace) -> int:
    if args.placement_only:
        return _placement_timelines()
    missing = missing_demo_extra()
    if missing:
        print(
            f"rungar demo runs AWS on moto's loopback server, which this installation lacks "
            f"(no module named {missing!r}). Install the demo extra:\n\n"
            "    pip install 'rungar[demo]'\n",
            file=sys.stderr,
        )
        return 2
    if args.example:
        from rungar.demo.examples import main as run_example

        return run_example([args.example])
    from rich.console import Console

    from rungar import logs
    from rungar.cli.status import render_status
    from rungar.demo.scenario import Burst, Summary, run_demo

    logs.configure("error")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    console = Console(width=None if sys.stdout.isatty() else 132)
    burst = Burst(small=args.small, large=args.large)

    async def until_done_or_stopped() -> Summary:
        from rungar.demo.stack import Stack
        from rungar.stopping import WITH_HANGUP, stop_on_signals

        stop = asyncio.Event()
        stop_on_signals(
            stop,
            at_once=Stack.terminate_all_now,
            note="Stopping the demo; press Ctrl-C again to stop at once.",
            signals=WITH_HANGUP,
        )
        return await run_demo(
            console,
            keep=args.keep,
            burst=burst,
            live=not args.no_live,
            stop=stop,
            # The status table fits the demo's console, as `rungar status` fits its terminal.
            render=lambda document: render_status(document, console.width),
        )

    summary = asyncio.run(until_done_or_stopped())
    if summary.stopped:
        return 0
    if not summary.ok:
        console.print(f"[red]only {summary.completed} of {summary.jobs} jobs finished[/]")
        return 1
    return 0


def _placement_timelines() -> int:
    from rungar.demo.placement_story import timelines

    for story in timelines():
        print(story.title)
        for line in story.lines:
            print(line)
        print()
    return 0
