"""``rungar demo``: replays the Placement seed's two examples on a virtual clock.

What it shows: providers tried in order, FULL refusals and the skip backoff they start, a
priority hold keeping smaller runners off the hosts until the large runner has its room.
"""

from __future__ import annotations

import argparse
from typing import Any

from rungar.demo.placement_story import timelines


def add_parser(subparsers: Any, name: str, help_text: str) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(name, help=help_text)
    parser.add_argument(
        "--placement-only",
        action="store_true",
        help="only replay the seed's placement examples on a virtual clock",
    )


def run(args: argparse.Namespace) -> int:
    for story in timelines():
        print(story.title)
        for line in story.lines:
            print(line)
        print()
    return 0
