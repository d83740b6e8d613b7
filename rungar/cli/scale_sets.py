"""``rungar scale-sets ls|inspect NAME|pause NAME [--wait]|resume NAME|rm NAME [--wait]``.

``ls`` has the columns NAME STATUS ID GROUP RUNNERS ASSIGNED BUSY IDLE STARTING (the words of
docs/cli.md, "One word per state"), and
shows as LEFTOVER a scale set no longer configured whose runners are still on the fleet.
``pause --wait`` prints a line each time the number of runners left changes and ends with
``X is paused, and no runner of it is left``; ``rm`` refuses while runners are busy unless
``--wait``. Pause and resume last until the daemon restarts, and the daemon's lines say so.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from typing import TYPE_CHECKING, Any

from rungar.cli.render import (
    RUNNER_FIT,
    RUNNER_HEADERS,
    Fit,
    fields,
    format_age,
    plural,
    print_json,
    runner_count,
    runner_rows,
    table,
    terminal_width,
)
from rungar.cli.socket import EXIT_OK, add_socket_argument, ask
from rungar.cli.status import desired_cell, queue_age_text, schedule_sentence, status_painter

if TYPE_CHECKING:
    from rungar.rpc.admin_client import AdminClient

LS_HEADERS = ("NAME", "STATUS", "ID", "GROUP", "RUNNERS", "ASSIGNED", "BUSY", "IDLE", "STARTING")
LS_FIT = Fit(drop=("GROUP", "ID", "STARTING"), short={"ASSIGNED": "ASSGN", "STARTING": "START"})


def add_parser(subparsers: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=help_text, description=help_text
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    ls = actions.add_parser("ls", help="list the scale sets")
    ls.add_argument("--json", action="store_true", help="print the list as JSON")
    inspect = actions.add_parser("inspect", help="one scale set in detail")
    inspect.add_argument("name", metavar="NAME")
    inspect.add_argument("--json", action="store_true", help="print the detail as JSON")
    pause = actions.add_parser("pause", help="take no jobs until resumed or the daemon restarts")
    pause.add_argument("name", metavar="NAME")
    pause.add_argument("--wait", action="store_true", help="wait until no runner of it is left")
    resume = actions.add_parser("resume", help="take jobs again")
    resume.add_argument("name", metavar="NAME")
    rm = actions.add_parser("rm", help="remove its runners and stop serving it")
    rm.add_argument("name", metavar="NAME")
    rm.add_argument("--wait", action="store_true", help="wait for busy runners to finish")
    for sub in (ls, inspect, pause, resume, rm):
        add_socket_argument(sub)
    return parser


def run(args: argparse.Namespace) -> int:
    async def work(client: AdminClient) -> int:
        if args.action == "ls":
            return await list_scale_sets(client, as_json=args.json)
        if args.action == "inspect":
            found = await client.inspect_scale_set(args.name)
            if args.json:
                print_json({**found, "runs_on": runs_on(found)})
            else:
                print("\n".join(inspect_lines(found)))
            return EXIT_OK
        wait = bool(getattr(args, "wait", False))
        async for line in client.scale_set_action(args.name, args.action, wait=wait):
            print(line, flush=True)
        return EXIT_OK

    return ask(args, work)


async def list_scale_sets(client: AdminClient, *, as_json: bool) -> int:
    status = await client.status()
    entries = []
    for s in status["scale_sets"]:
        detail = await client.inspect_scale_set(s["name"])
        entries.append({**s, "id": detail.get("id"), "runner_group": detail.get("runner_group")})
    entries += leftovers(status)
    if as_json:
        print_json(entries)
        return EXIT_OK
    rows = [ls_row(e) for e in entries]
    painter = status_painter(sys.stdout)
    lines = table(LS_HEADERS, rows, indent="", width=terminal_width(), fit=LS_FIT, paint=painter)
    print("\n".join(lines))
    return EXIT_OK


def leftovers(status: dict[str, Any]) -> list[dict[str, Any]]:
    """Scale sets no longer configured whose runners are still on the fleet."""
    configured = {s["name"] for s in status["scale_sets"]}
    found = Counter(r["scale_set"] for r in status["runners"] if r["scale_set"] not in configured)
    return [
        {"name": name, "status": "LEFTOVER", "runners": count, "busy": 0, "idle": 0}
        for name, count in sorted(found.items())
    ]


def ls_row(entry: dict[str, Any]) -> list[object]:
    return [
        entry["name"],
        entry["status"],
        entry.get("id"),
        entry.get("runner_group"),
        entry["runners"],
        entry.get("assigned"),
        entry.get("busy"),
        entry.get("idle"),
        entry.get("starting", 0),
    ]


def runs_on(found: dict[str, Any]) -> str:
    """The ``runs-on:`` value a workflow job uses to get this scale set's runners: its labels
    (its name when it sets none), as a YAML flow list when there are several."""
    labels = list(found.get("labels") or [found["name"]])
    return labels[0] if len(labels) == 1 else "[" + ", ".join(labels) + "]"


def inspect_lines(found: dict[str, Any]) -> list[str]:
    providers = ",".join(found.get("providers", []))
    if found.get("placement"):
        providers += f" ({found['placement']})"
    runners = runner_count(
        found["runners"], found.get("busy", 0), found.get("idle", 0), found.get("starting", 0)
    )
    start_timeout = found.get("start_timeout")
    lines = [f"Scale set {found['name']}"]
    lines += fields(
        [
            ("Status", found.get("status")),
            ("Note", found.get("note")),
            ("ID", found.get("id")),
            ("Group", found.get("runner_group")),
            ("Labels", ",".join(found.get("labels", []))),
            ("Providers", providers),
            ("Runner", found.get("runner")),
            ("Runners", runners),
            ("Assigned", found.get("assigned")),
            ("Queue age", queue_age_text([found], found.get("now")) or None),
            ("Desired", desired_cell(found, reason=bool(found.get("warm")))),
            ("Limits", f"min {found.get('min')}, max {found.get('max')}"),
            ("Schedule", schedule_sentence(found, found.get("now")) or None),
            ("Priority", found.get("priority")),
            ("Paused", "yes" if found.get("paused") else "no"),
            ("Start timeout", format_age(start_timeout) if start_timeout is not None else None),
        ]
    )
    lines += ["", "In a workflow", f"  runs-on: {runs_on(found)}"]
    skips = found.get("skips", [])
    lines += ["", f"Skips ({len(skips)})"] + [f"  {s['sentence']}" for s in skips]
    runner_list = found.get("runner_list", [])
    lines += ["", f"Runners ({len(runner_list)})"]
    if runner_list:
        lines += table(
            RUNNER_HEADERS, runner_rows(runner_list), width=terminal_width(), fit=RUNNER_FIT
        )
    lines += ["", f"{plural(len(runner_list), 'runner')} of at most {found.get('max')}."]
    return lines
