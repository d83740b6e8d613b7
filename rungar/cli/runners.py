"""``rungar runners ls [--scale-set S] [--provider P] [--json]|rm NAME...`` (docs/commands.md).

``ls`` shows RUNNER SCALE SET PROVIDER STATE MACHINE GITHUB AGE JOB, as ``rungar status`` does.
``rm`` removes each runner the safe way round (registration, then machine) and prints
``NAME: removed from PROVIDER``; a runner that could not be removed is reported on stderr and
makes the command exit 1.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from rungar.cli.render import (
    RUNNER_FIT,
    RUNNER_HEADERS,
    print_json,
    runner_rows,
    table,
    terminal_width,
)
from rungar.cli.socket import EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, add_socket_argument, ask
from rungar.model.sentences import no_such_name

if TYPE_CHECKING:
    from rungar.rpc.admin_client import AdminClient


def add_parser(subparsers: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=help_text, description=help_text
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    ls = actions.add_parser("ls", help="list the runners")
    ls.add_argument("--scale-set", metavar="S", default="", help="only this scale set's")
    ls.add_argument("--provider", metavar="P", default="", help="only those on this provider")
    ls.add_argument("--json", action="store_true", help="print the list as JSON")
    rm = actions.add_parser("rm", help="remove runners: registration first, then machine")
    rm.add_argument("names", metavar="NAME", nargs="+")
    for sub in (ls, rm):
        add_socket_argument(sub)
    return parser


def select(runners: list[dict[str, Any]], scale_set: str, provider: str) -> list[dict[str, Any]]:
    return [
        r
        for r in runners
        if (not scale_set or r["scale_set"] == scale_set)
        and (not provider or r["provider"] == provider)
    ]


def unknown_filter(status: dict[str, Any], scale_set: str, provider: str) -> str:
    """What is wrong with ``--scale-set``/``--provider``: a name neither configured nor on any
    runner (a scale set removed since whose runners remain is known), with the closest; or ""."""
    runners = status.get("runners", [])
    for kind, name, configured, key in (
        ("scale set", scale_set, [s["name"] for s in status.get("scale_sets", [])], "scale_set"),
        ("provider", provider, [p["name"] for p in status.get("providers", [])], "provider"),
    ):
        known = set(configured) | {str(r.get(key) or "") for r in runners} - {""}
        if name and name not in known:
            return no_such_name(kind, name, known)
    return ""


def run(args: argparse.Namespace) -> int:
    async def work(client: AdminClient) -> int:
        if args.action == "ls":
            status = await client.status()
            wrong = unknown_filter(status, args.scale_set, args.provider)
            if wrong:
                print(f"rungar: {wrong}", file=sys.stderr)
                return EXIT_USAGE
            found = select(status["runners"], args.scale_set, args.provider)
            if args.json:
                print_json(found)
            elif found:
                rows = runner_rows(found)
                width = terminal_width()
                print("\n".join(table(RUNNER_HEADERS, rows, "", width=width, fit=RUNNER_FIT)))
            return EXIT_OK
        failed = 0
        for result in await client.remove_runners(list(args.names)):
            if result["ok"]:
                print(result["message"])
            else:
                failed += 1
                print(f"rungar: {result['message']}", file=sys.stderr)
        return EXIT_RUNTIME if failed else EXIT_OK

    return ask(args, work)
