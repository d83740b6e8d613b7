"""``rungar events [-f] [--scale-set S] [--provider P] [--since 1h|10:30|2026-09-28] [-n N]``.

The daemon's kept events (docs/events.md), oldest first, one line each::

    2026-09-28 10:16:40   Provider    compute2   Full   Full for runner ...: out of disk; ...

``-f`` then follows new events with no gap; ``--json`` prints one JSON object per line
(JSONL). ``--since`` takes a duration back from now (``1h``, ``30m``), a time today
(``10:30``, ``10:30:15``) or a date, with or without a time (``2026-09-28``,
``2026-09-28 10:30``), in local time.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from typing import TYPE_CHECKING, Any

from rungar.cli.render import format_time
from rungar.cli.socket import EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, add_socket_argument, ask
from rungar.model.units import parse_duration

if TYPE_CHECKING:
    from rungar.rpc.admin_client import AdminClient

KIND_WORDS = {"runner": "Runner", "provider": "Provider", "scale_set": "Scale set"}
_TIME_FORMATS = ("%H:%M", "%H:%M:%S")
_DATE_FORMATS = ("%Y-%m-%d", "%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S")


JSON_SHAPE = (
    '{"time": 1790000000.5, "kind": "runner", "name": "linux-1a2b3c4d", "action": "adopted",\n'
    ' "scale_set": "linux", "provider": "compute1", "message": "…", "attributes": {"why": …}}'
)


def epilog() -> str:
    """The event kinds and the JSON shape, from the daemon's own catalogue."""
    from rungar.model.event_kinds import EVENT_ACTIONS

    width = max(len(f"{kind} {action}") for kind, action in EVENT_ACTIONS)
    rows = [
        f"  {f'{kind} {action}'.ljust(width)}  {meaning}"
        for (kind, action), meaning in EVENT_ACTIONS.items()
    ]
    return "\n".join(
        [
            "events (kind action, then what it means):",
            *rows,
            "",
            "--json prints one object per line, the event log's own stable format:",
            JSON_SHAPE,
            "time is epoch seconds; provider is empty for a runner with no machine; attributes",
            "carry the details named above. See docs/events.md.",
        ]
    )


def add_parser(subparsers: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name,
        help=help_text,
        description=help_text,
        epilog=epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-f", "--follow", action="store_true", help="keep following new events")
    parser.add_argument("--scale-set", metavar="S", default="", help="only this scale set's")
    parser.add_argument("--provider", metavar="P", default="", help="only this provider's")
    parser.add_argument(
        "--since", metavar="WHEN", help="only since 1h (ago), 10:30 (today) or 2026-09-28"
    )
    parser.add_argument(
        "-n", "--tail", metavar="N", type=int, default=0, help="only the last N of the history"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    add_socket_argument(parser)
    return parser


def parse_since(text: str, now: dt.datetime) -> float:
    """Epoch seconds for ``--since``; ValueError when it is none of the accepted forms."""
    text = text.strip()
    for fmt in _TIME_FORMATS:
        try:
            clock = dt.datetime.strptime(text, fmt).time()
        except ValueError:
            continue
        return dt.datetime.combine(now.date(), clock).timestamp()
    for fmt in _DATE_FORMATS:
        try:
            return dt.datetime.strptime(text, fmt).timestamp()
        except ValueError:
            continue
    try:
        return now.timestamp() - parse_duration(text)
    except ValueError:
        pass
    raise ValueError(
        f"--since {text!r}: give a duration (1h), a time (10:30) or a date (2026-09-28)"
    )


def event_line(event: dict[str, Any]) -> str:
    kind = KIND_WORDS.get(event["kind"], event["kind"].capitalize())
    action = str(event["action"]).replace("_", " ").capitalize()
    when = format_time(event["time"])
    return (
        f"{when}   {kind:<10}  {event['name']:<12}   {action}   {event.get('message', '')}".rstrip()
    )


def run(args: argparse.Namespace) -> int:
    since = 0.0
    if args.since:
        try:
            since = parse_since(args.since, dt.datetime.now())
        except ValueError as e:
            print(f"rungar events: {e}", file=sys.stderr)
            return EXIT_USAGE
    if args.tail < 0:
        print("rungar events: -n must be 0 or more", file=sys.stderr)
        return EXIT_USAGE

    async def work(client: AdminClient) -> int:
        async for event in client.events(
            scale_set=args.scale_set,
            provider=args.provider,
            since=since,
            limit=args.tail,
            follow=args.follow,
        ):
            print(json.dumps(event, sort_keys=True) if args.json else event_line(event), flush=True)
        if args.follow:  # a follow ends only when the daemon stops it: that is not success
            print("rungar: the daemon ended the event stream", file=sys.stderr)
            return EXIT_RUNTIME
        return EXIT_OK

    return ask(args, work)
