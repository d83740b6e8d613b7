"""``rungar providers ls|inspect NAME|disable NAME|enable NAME|drain NAME`` (docs/commands.md).

``ls`` has the columns NAME TYPE STATUS RUNNERS WEIGHT SCALE SETS (RUNNERS as count/max when
the provider has a max). ``drain`` prints the daemon's lines as they come::

    Provider compute2 is disabled until the daemon restarts.
    Waiting for 2 runners on compute2 to finish
    compute2 is drained: no runner is left on it

Disabling, enabling and draining last until the daemon restarts; the lines say so.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from rungar.cli.render import (
    RUNNER_FIT,
    RUNNER_HEADERS,
    Fit,
    count_of_max,
    fields,
    print_json,
    runner_rows,
    table,
    terminal_width,
)
from rungar.cli.socket import EXIT_OK, add_socket_argument, ask
from rungar.model import sentences

if TYPE_CHECKING:
    from rungar.rpc.admin_client import AdminClient

LS_HEADERS = ("NAME", "TYPE", "STATUS", "RUNNERS", "WEIGHT", "SCALE SETS")
LS_FIT = Fit(drop=("WEIGHT", "TYPE", "SCALE SETS"))


def add_parser(subparsers: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=help_text, description=help_text
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    ls = actions.add_parser("ls", help="list the providers")
    ls.add_argument("--json", action="store_true", help="print the list as JSON")
    subs = [ls]
    for action, text in (
        ("inspect", "one provider in detail"),
        ("disable", "place nothing more on it, until enabled or the daemon restarts"),
        ("enable", "place runners on it again"),
        ("drain", "disable it and wait until no runner is left on it"),
    ):
        sub = actions.add_parser(action, help=text)
        sub.add_argument("name", metavar="NAME")
        if action == "inspect":
            sub.add_argument("--json", action="store_true", help="print the detail as JSON")
        subs.append(sub)
    for sub in subs:
        add_socket_argument(sub)
    return parser


def run(args: argparse.Namespace) -> int:
    async def work(client: AdminClient) -> int:
        if args.action == "ls":
            entries = provider_entries(await client.status())
            if args.json:
                print_json(entries)
            else:
                rows = [ls_row(e) for e in entries]
                width = terminal_width()
                print("\n".join(table(LS_HEADERS, rows, indent="", width=width, fit=LS_FIT)))
            return EXIT_OK
        if args.action == "inspect":
            found = await client.inspect_provider(args.name)
            if args.json:
                print_json(found)
            else:
                print("\n".join(inspect_lines(found)))
            return EXIT_OK
        async for line in client.provider_action(args.name, args.action):
            print(line, flush=True)
        return EXIT_OK

    return ask(args, work)


def provider_entries(status: dict[str, Any]) -> list[dict[str, Any]]:
    """Each provider's status entry, with the scale sets that use it."""
    entries = []
    for p in status["providers"]:
        users = [s["name"] for s in status["scale_sets"] if p["name"] in s.get("providers", [])]
        entries.append({**p, "scale_sets": users})
    return entries


def ls_row(entry: dict[str, Any]) -> list[object]:
    return [
        entry["name"],
        entry.get("type"),
        entry["status"],
        count_of_max(entry["runners"], entry.get("max_runners")),
        f"{entry['weight']:g}" if isinstance(entry.get("weight"), int | float) else None,
        ",".join(entry.get("scale_sets", [])),
    ]


def inspect_lines(found: dict[str, Any]) -> list[str]:
    hold = found.get("hold")
    held = None
    if hold:
        held = sentences.hold_text(hold["holder"], hold["priority"])
    lines = [f"Provider {found['name']}"]
    lines += fields(
        [
            ("Type", found.get("type")),
            ("Status", found.get("status")),
            ("Runners", count_of_max(found["runners"], found.get("max_runners"))),
            ("Leaving", found.get("leaving")),
            ("Weight", found.get("weight")),
            ("Reachable", "yes" if found.get("reachable", True) else "no"),
            ("Held", held),
            ("Scale sets", ",".join(found.get("scale_sets", []))),
        ]
    )
    skips = found.get("skips", [])
    lines += ["", f"Skips ({len(skips)})"] + [f"  {s['sentence']}" for s in skips]
    runner_list = found.get("runner_list", [])
    lines += ["", f"Runners ({len(runner_list)})"]
    if runner_list:
        lines += table(
            RUNNER_HEADERS, runner_rows(runner_list), width=terminal_width(), fit=RUNNER_FIT
        )
    return lines
