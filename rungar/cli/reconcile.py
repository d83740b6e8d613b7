"""``rungar reconcile [SCALE_SET...]``: run a reconcile pass now (docs/commands.md).

The pass covers the whole fleet (listing every provider, adopting, removing what can no longer
serve, settling leaving machines); the report names the scale sets asked, or all of them:
``rungar-c2-m4: 0 runners, 0 desired``.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from rungar.cli.socket import EXIT_OK, add_socket_argument, ask

if TYPE_CHECKING:
    from rungar.rpc.admin_client import AdminClient


def add_parser(subparsers: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=help_text, description=help_text
    )
    parser.add_argument(
        "scale_sets", metavar="SCALE_SET", nargs="*", help="report on these (default: all)"
    )
    add_socket_argument(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    async def work(client: AdminClient) -> int:
        for line in await client.reconcile(list(args.scale_sets)):
            print(line)
        return EXIT_OK

    return ask(args, work)
