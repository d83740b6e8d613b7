"""``rungar usage [--by repository|workflow|scale-set|provider] [--since 7d] [--json]``.

The jobs Rungar served, summed (docs/usage.md, "Usage"): per group its jobs by conclusion, the
runner-seconds of the runners that served them, the p50 and p95 of their waits (GitHub's:
assigned to the scale set until a runner took the job) and, where their provider has a
``price_per_hour``, the cost. Read from the daemon's state database through its admin socket,
so the numbers span restarts, back as far as ``usage.retention`` keeps them.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any

from rungar.cli.render import plural, print_json, table
from rungar.cli.socket import EXIT_OK, EXIT_USAGE, add_socket_argument, ask

if TYPE_CHECKING:
    from rungar.rpc.admin_client import AdminClient

BY_CHOICES = ("repository", "workflow", "scale-set", "provider")
HEADERS = ("JOBS", "SUCCEEDED", "FAILED", "OTHER", "RUNNER TIME", "WAIT P50", "WAIT P95", "COST")


def add_parser(subparsers: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=help_text, description=help_text
    )
    parser.add_argument(
        "--by", choices=BY_CHOICES, default="repository", help="how to group (default: repository)"
    )
    parser.add_argument(
        "--since",
        default="7d",
        metavar="DURATION",
        help="jobs that ended within this long, such as 24h, 7d or 30d (default: 7d)",
    )
    parser.add_argument("--json", action="store_true", help="print the usage document as JSON")
    add_socket_argument(parser)
    return parser


def duration_text(seconds: float | None) -> str:
    """``3h 12m``, ``4m 05s``, ``12.5s``: enough to compare rows at a glance."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def money(cost: float | None) -> str:
    """Cents, unless the amount is smaller than a cent (a few minutes of a cheap machine)."""
    if cost is None:
        return "-"
    return f"{cost:.2f}" if cost >= 0.01 or cost == 0 else f"{cost:.4f}"


def rows_of(groups: list[dict[str, Any]]) -> list[list[object]]:
    rows: list[list[object]] = []
    for group in groups:
        ended = dict(group["conclusions"])
        succeeded, failed = ended.pop("succeeded", 0), ended.pop("failed", 0)
        cost = group["cost"]
        rows.append(
            [
                group["key"],
                group["jobs"],
                succeeded,
                failed,
                sum(ended.values()),
                duration_text(group["runner_seconds"]),
                duration_text(group["wait_p50"]),
                duration_text(group["wait_p95"]),
                money(cost),
            ]
        )
    return rows


def render(document: dict[str, Any], since_text: str) -> list[str]:
    by = document["by"].upper().replace("-", " ")
    groups = document["groups"]
    lines = [f"Jobs served in the last {since_text}, by {document['by']}"]
    if not groups:
        return [*lines, "  no jobs served in that time"]
    body = table(
        (by, *HEADERS), [*rows_of(groups), ["TOTAL", *rows_of([document["total"]])[0][1:]]]
    )
    lines += body
    lines.append(
        f"{plural(document['total']['jobs'], 'job')}; OTHER = cancelled, timed out or unknown; "
        "cost where the provider has a price_per_hour"
    )
    lines.append(
        "RUNNER TIME and WAIT on Rungar's clock; WAIT: from GitHub assigning a job to its "
        'scale set until a runner took it (docs/usage.md, "Clocks")'
    )
    return lines


def run(args: argparse.Namespace) -> int:
    from rungar.model.units import parse_duration

    try:
        window = parse_duration(args.since)
    except ValueError as e:
        print(f"rungar usage: --since: {e}", file=sys.stderr)
        return EXIT_USAGE

    async def work(client: AdminClient) -> int:
        document = await client.usage(args.by, time.time() - window)
        if args.json:
            print_json(document)
        else:
            for line in render(document, args.since):
                print(line)
        return EXIT_OK

    return ask(args, work)
