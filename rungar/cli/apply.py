"""``rungar apply FILE [--dry-run]``: change the running daemon's scale sets live (README).

The file is checked here first, exactly as ``rungar validate`` does, so a broken file never
reaches the daemon: its problems are printed ``FILE:LINE:COL: key.path: what is wrong`` and the
command exits 2. The daemon then checks it again against the providers (``ValidateRunner``),
answers the difference from what it runs, and applies it unless ``--dry-run``: new scale sets
start, removed ones drain, changed limits take effect at once. Problems found by the daemon
exit 2 as well; a daemon that cannot be asked exits 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from rungar.cli.render import print_json
from rungar.cli.socket import EXIT_OK, EXIT_USAGE, add_socket_argument, ask
from rungar.config.loader import load_scale_sets
from rungar.errors import ConfigError

if TYPE_CHECKING:
    from rungar.rpc.admin_client import AdminClient


def add_parser(subparsers: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=help_text, description=help_text
    )
    parser.add_argument("file", metavar="FILE", help="the scale_sets.yaml to apply")
    parser.add_argument(
        "--dry-run", action="store_true", help="check and show the difference; change nothing"
    )
    parser.add_argument("--json", action="store_true", help="print the daemon's answer as JSON")
    add_socket_argument(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    path: str = args.file
    try:
        load_scale_sets(path)
    except ConfigError as e:
        for line in e.problems:
            print(line, file=sys.stderr)
        return EXIT_USAGE
    with open(path, "rb") as f:
        text = f.read().decode("utf-8")  # load_scale_sets has checked size and encoding

    async def work(client: AdminClient) -> int:
        # The daemon resolves relative paths in the file against its folder: send where it is.
        answer = await client.apply(text, os.path.abspath(path), dry_run=args.dry_run)
        if args.json:
            print_json(answer)
        else:
            show(answer, dry_run=args.dry_run)
        return EXIT_USAGE if answer["problems"] else EXIT_OK

    return ask(args, work)


def show(answer: dict[str, Any], *, dry_run: bool) -> None:
    for line in answer["diff"]:
        print(line)
    if not answer["diff"]:
        print("no changes")
    for problem in answer["problems"]:
        print(problem, file=sys.stderr)
    if answer["applied"]:
        print("applied")
    elif answer["problems"]:
        print("not applied: fix the problems above", file=sys.stderr)
    elif dry_run:
        print("not applied (--dry-run)")
