"""``rungar status [--json]``: the daemon, its scale sets, providers, skips and runners.

The layout (docs/troubleshooting.md): a header block, then "Scale sets (N)"
with a note line under the table for each scale set that is not plainly listening, "Providers
(N)" followed by one line per unreachable provider and one per skip (the document's own
"sentence"), "Runners (N)", and a closing count against what the scale sets allow.

It reports what Rungar counts and the skips and holds it applies, never a provider's spare capacity:
the words a person would read as such are not in it, and a test checks that. Exits 0 whatever it
reports, and 1 only when the daemon cannot be asked, so a script can tell the two apart.
``--wait-ready`` first waits until the daemon is ready (every scale set has its message session or
waits for another daemon's), exiting 1 if ``--timeout`` passes first.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import urlparse
from zoneinfo import ZoneInfo

from rungar.cli.render import (
    RUNNER_FIT,
    RUNNER_HEADERS,
    Fit,
    count_of_max,
    format_age,
    format_time,
    plural,
    print_json,
    runner_count,
    runner_rows,
    table,
    terminal_width,
    word,
)
from rungar.cli.socket import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RUNTIME,
    EXIT_USAGE,
    add_socket_argument,
    ask,
    socket_path,
)
from rungar.model import sentences
from rungar.model.json_shapes import STATUS_SHAPE

if TYPE_CHECKING:
    from rungar.rpc.admin_client import AdminClient

SCALE_SET_HEADERS = (
    "SCALE SET",
    "STATUS",
    "PROVIDERS",
    "LABELS",
    "RUNNER",
    "RUNNERS",
    "DESIRED",
    "MIN",
    "MAX",
    "PRIORITY",
)
# At a narrow terminal: labels are most often the name again; min and max are in the config.
SCALE_SET_FIT = Fit(
    drop=("LABELS", "PRIORITY", "RUNNER", "MIN", "MAX", "PROVIDERS", "DESIRED"),
    short={"PRIORITY": "PRIO", "PROVIDERS": "VIA"},
)
Painter = Callable[[str, str], str]  # (column header, cell) -> the cell, coloured or not
READY_POLL = 0.2  # seconds between two questions of --wait-ready: a local socket, cheap
PROVIDER_HEADERS = ("PROVIDER", "TYPE", "STATUS", "RUNNERS")
PROVIDER_FIT = Fit(drop=("TYPE",))
# The note for a status the daemon gave no sentence for.
DEFAULT_NOTES = {
    "WAITING": sentences.WAITING_NOTE,
    "UNREACHABLE": sentences.UNREACHABLE_NOTE,
    "STARTING": sentences.STARTING_NOTE,
}


def add_parser(subparsers: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=help_text, description=help_text
    )
    parser.add_argument("--json", action="store_true", help="print the status document as JSON")
    parser.add_argument(
        "--shape",
        type=int,
        choices=(1, STATUS_SHAPE),
        default=STATUS_SHAPE,
        help=(
            f"with --json: the document's shape version (default {STATUS_SHAPE}); 1 is the "
            "previous shape, kept for one minor release (docs/json.md)"
        ),
    )
    parser.add_argument(
        "--wait-ready",
        action="store_true",
        help=(
            "first wait until the daemon is ready: every scale set has its message session or "
            "waits for another daemon's (a daemon not answering yet is waited for too)"
        ),
    )
    parser.add_argument(
        "--timeout",
        type=duration_argument,
        metavar="D",
        help="with --wait-ready: give up after D (30s, 2m) and exit 1; default: no limit",
    )
    add_socket_argument(parser)
    return parser


def duration_argument(text: str) -> float:
    from rungar.model.units import parse_duration

    try:
        seconds = parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from e
    if seconds <= 0:
        raise argparse.ArgumentTypeError("must be more than 0")
    return seconds


def run(args: argparse.Namespace) -> int:
    if args.timeout is not None and not args.wait_ready:
        print("rungar: --timeout goes with --wait-ready", file=sys.stderr)
        return EXIT_USAGE
    if args.wait_ready:
        try:
            ready = asyncio.run(wait_ready(socket_path(args), args.timeout))
        except KeyboardInterrupt:
            return EXIT_INTERRUPTED
        if ready is not None:
            print(f"rungar: not ready after {args.timeout:g}s: {ready}", file=sys.stderr)
            return EXIT_RUNTIME

    async def work(client: AdminClient) -> int:
        document = await client.status()
        if args.json:
            print_json(shape_one(document) if args.shape == 1 else document)
        else:
            painter = status_painter(sys.stdout)
            print(render_status(document, terminal_width(), painter), end="")
        return EXIT_OK

    return ask(args, work)


def shape_one(document: dict[str, Any]) -> dict[str, Any]:
    """The status document in shape version 1, for scripts written against it: a runner's
    ``state``, ``machine`` and ``github`` in words (``Busy``, ``Not listed yet``), a provider
    with no limit at ``max_runners: 0``, and a scale set's ``runners`` without the creates in
    flight. Keys shape 2 added are kept, as shape 1 allowed added keys."""
    one = {key: value for key, value in document.items() if key != "version"}
    one["scale_sets"] = [
        {**s, "runners": int(s.get("runners") or 0) - int(s.get("creating") or 0)}
        for s in document.get("scale_sets", [])
    ]
    one["providers"] = [
        {**p, "max_runners": p.get("max_runners") or 0} for p in document.get("providers", [])
    ]
    one["runners"] = [
        {**r, "state": word(r.get("state")), "machine": word(r.get("machine")),
         "github": word(r.get("github"))}
        for r in document.get("runners", [])
    ]  # fmt: skip
    return one


async def wait_ready(path: str, timeout: float | None) -> str | None:
    """Ask the daemon until it says it is ready; None then, else (out of time) why not."""
    from rungar.rpc.admin_client import AdminClient, DaemonUnreachable

    loop = asyncio.get_running_loop()
    give_up = None if timeout is None else loop.time() + timeout
    while True:
        # A new connection each time: a daemon still starting is reached as soon as it listens,
        # not after a channel's reconnect backoff.
        try:
            async with AdminClient(path) as client:
                daemon = (await client.status())["daemon"]
            if daemon.get("ready"):
                return None
            why = str(daemon.get("readiness", "not ready"))
        except DaemonUnreachable as e:
            why = str(e)
        if give_up is not None and loop.time() >= give_up:
            return why
        await asyncio.sleep(READY_POLL)


def github_kind(url: str) -> str:
    """What a GitHub URL names: an organisation, a repository or an enterprise."""
    parts = [p for p in urlparse(url).path.split("/") if p]
    if len(parts) == 2 and parts[0] == "enterprises":
        return "enterprise"
    if len(parts) == 2:
        return "repository"
    return "organisation" if len(parts) == 1 else ""


def queue_age_text(scale_sets: list[dict[str, Any]], now: float | None) -> str:
    """How old GitHub's numbers are, by the stalest scale set, so a stalled listener never
    looks fresh: ``GitHub's numbers 12s old``, ``GitHub's numbers 4m old (rungar-c4-m8)``, or
    ``no word from GitHub yet (rungar-gpu)``."""
    told = [s for s in scale_sets if "polled_at" in s]  # a daemon before polled_at tells none
    if not told or now is None:
        return ""
    never = [s["name"] for s in told if s.get("polled_at") is None and not s.get("paused")]
    if never:
        return f"no word from GitHub yet ({', '.join(never)})"
    ages = [(now - float(s["polled_at"]), s["name"]) for s in told if s.get("polled_at")]
    if not ages:
        return ""
    age, name = max(ages)
    which = f" ({name})" if len(ages) > 1 else ""
    return f"GitHub's numbers {format_age(age)} old{which}"


def role_text(lease: dict[str, Any] | None, now: float | None) -> str:
    """``active (lease held since …, renewed 3s ago)``, or ``standby; active is host-b/4242,
    seen holding the lease 3s ago``: which of two daemons of one installation acts."""
    if not lease:
        return ""
    now = now or 0.0
    if lease.get("role") == "active":
        held, renewed = lease.get("held_since"), lease.get("renewed_at")
        text = "active (lease held"
        if held:
            text += f" since {format_time(held)}"
        if renewed and now:
            text += f", renewed {format_age(now - renewed)} ago"
        if not lease.get("adopted"):
            text += "; adopting what exists"
        return text + ")" + unconfirmed_text(lease, now)
    holder, seen = lease.get("holder"), lease.get("holder_seen_at")
    if holder:
        ago = f", seen holding the lease {format_age(now - seen)} ago" if seen and now else ""
        return f"standby; active is {holder}{ago}"
    if lease.get("unconfirmed_why"):
        unconfirmed = unconfirmed_text(lease, now)
        return f"standby{unconfirmed}; it acts again once GitHub confirms the lease"
    return f"standby; waiting for the message session of scale set {lease.get('lead', '?')}"


def unconfirmed_text(lease: dict[str, Any], now: float) -> str:
    """``; GitHub does not answer: the lease renewal timed out after 10 s; 25s without a
    confirmation``, or "" while GitHub confirms the lease."""
    why, since = lease.get("unconfirmed_why"), lease.get("unconfirmed_since")
    if not why:
        return ""
    for_how_long = f"; {format_age(now - since)} without a confirmation" if since and now else ""
    return f"; {why}{for_how_long}"


def header_lines(daemon: dict[str, Any], queue_age: str = "") -> list[str]:
    fields: list[tuple[str, str]] = []
    github = str(daemon.get("github") or "")
    if github:
        kind = github_kind(github)
        fields.append(("GitHub", f"{github} ({kind})" if kind else github))
    if daemon.get("credentials"):
        fields.append(("Credentials", str(daemon["credentials"])))
    if daemon.get("installation"):
        fields.append(("Installation", str(daemon["installation"])))
    started, now = daemon.get("started_at"), daemon.get("now")
    if started:
        running = f"since {format_time(started)}"
        if now:
            running += f" ({format_age(now - started)})"
        fields.append(("Running", running))
    role = role_text(daemon.get("lease"), now)
    if role:
        fields.append(("Role", role))
    if daemon.get("config_path"):
        fields.append(("Configuration", str(daemon["config_path"])))
    if queue_age:
        fields.append(("Queue age", queue_age))
    # Worded by the daemon, for the fleet page too: the re-runs, the API budget, the queue.
    fields += [(str(n["label"]), str(n["text"])) for n in daemon.get("notes") or []]
    if daemon.get("state_moved_aside"):
        kept = daemon["state_moved_aside"]
        fields.append(("State", f"was corrupt; kept as {kept}, started afresh"))
    lines = [f"Rungar v{daemon.get('version', '?')}", ""]
    lines += [f"  {(label + ':').ljust(15)}{value}" for label, value in fields]
    if daemon.get("github_error"):
        lines.append(f"  {'':15}{daemon['github_error']}")
    return lines


def desired_cell(scale_set: dict[str, Any], *, reason: bool = False) -> object:
    """``7 (4 reserve)``: how much of desired is idle reserve beyond the assigned jobs, and
    the warm pool's part of it: ``6 (2 reserve + 3 warm)``; with ``reason``, why the pool is
    that size: ``6 (2 reserve + 3 warm: p90 of 3 jobs at 08:15 on the last 5 weekdays)``."""
    desired, reserve = scale_set.get("desired"), scale_set.get("reserve") or 0
    warm = scale_set.get("warm") or {}
    warm_runners = int(warm.get("runners") or 0)
    if desired is None or not (reserve or (reason and warm)):
        return desired
    parts = [f"{reserve - warm_runners} reserve"] if reserve - warm_runners else []
    if warm_runners or reason:
        why = f": {warm['reason']}" if reason and warm.get("reason") else ""
        parts.append(f"{warm_runners} warm{why}")
    return f"{desired} ({' + '.join(parts)})"


def schedule_sentence(scale_set: dict[str, Any], now: float | None) -> str:
    """The window in force and the next change, or "" for a scale set with no schedule."""
    found = scale_set.get("schedule")
    if not found:
        return ""
    zone = str(found.get("timezone") or "UTC")
    window = found.get("window")
    head = (
        f"window {window} ({zone}) in force, min_runners {found.get('min_runners')}"
        if window
        else f"outside every window ({zone}), min_runners {found.get('min_runners')}"
    )
    change = found.get("next_change")
    if change is None:
        return f"{head}; no change ahead"
    try:
        when = datetime.fromtimestamp(float(change), ZoneInfo(zone)).strftime("%a %H:%M")
    except (ValueError, KeyError, OSError):
        when = format_time(float(change))
    next_window = found.get("next_window")
    then = f"window {next_window}" if next_window else "outside every window"
    left = f" (in {format_age(float(change) - now)})" if now is not None else ""
    return f"{head}; {when}{left}: min_runners {found.get('next_min_runners')}, {then}"


def scale_set_note(scale_set: dict[str, Any]) -> str:
    """The note under the table, or "" when the scale set is plainly listening."""
    note = str(scale_set.get("note") or "")
    status = str(scale_set.get("status", ""))
    if status == "LISTENING" and not note:
        return ""
    return note or DEFAULT_NOTES.get(status, status.lower())


def status_painter(stream: TextIO) -> Painter | None:
    """Colour for the tables' STATUS cells when ``stream`` takes colour (``--color``, docs/cli.md),
    else None."""
    from rungar.cli.style import paint_status, use_color

    if not use_color(stream):
        return None
    return lambda header, text: paint_status(text, stream) if header == "STATUS" else text


def scale_set_lines(
    scale_sets: list[dict[str, Any]],
    now: float | None = None,
    width: int | None = None,
    paint: Painter | None = None,
) -> list[str]:
    rows = []
    for s in scale_sets:
        providers = ",".join(s.get("providers", []))
        if s.get("placement"):
            providers += f" ({s['placement']})"
        rows.append(
            [
                s["name"],
                s["status"],
                providers,
                ",".join(s.get("labels", [])),
                s.get("runner"),
                runner_count(
                    s["runners"], s.get("busy", 0), s.get("idle", 0), s.get("starting", 0)
                ),
                desired_cell(s),
                s.get("min"),
                s.get("max"),
                s.get("priority"),
            ]
        )
    lines = [f"Scale sets ({len(scale_sets)})"]
    if rows:
        lines += table(SCALE_SET_HEADERS, rows, width=width, fit=SCALE_SET_FIT, paint=paint)
    for s in scale_sets:
        note = scale_set_note(s)
        if note:
            lines.append(f"  {s['name']}: {note}")
        schedule = schedule_sentence(s, now)
        if schedule:
            lines.append(f"  {s['name']}: {schedule}")
        if s.get("warm") and s.get("desired") is not None:
            lines.append(f"  {s['name']}: desired {desired_cell(s, reason=True)}")
        statistics = (s.get("statistics") or {}).get("sentence")
        if statistics:
            lines.append(f"  {s['name']}: {statistics}")
    return lines


def provider_lines(
    providers: list[dict[str, Any]],
    skips: list[dict[str, Any]],
    width: int | None = None,
    paint: Painter | None = None,
) -> list[str]:
    rows = [
        [p["name"], p.get("type"), p["status"], count_of_max(p["runners"], p.get("max_runners"))]
        for p in providers
    ]
    lines = [f"Providers ({len(providers)})"]
    if rows:
        lines += table(PROVIDER_HEADERS, rows, width=width, fit=PROVIDER_FIT, paint=paint)
    for p in providers:
        if p.get("reachable") is False:
            why = p.get("error") or p.get("unreachable_reason") or ""
            lines.append(f"  {sentences.cannot_be_reached(p['name'], why)}")
            if p.get("kept"):
                kept, off_in = p["kept"], p.get("written_off_in")
                lines.append(f"  {sentences.kept_while_unreachable(p['name'], kept, off_in)}")
    for p in providers:
        lines += [f"  {sentence}" for sentence in p.get("listing_faults") or []]
    for p in providers:
        deadline = p.get("runner_deadline") or {}
        if deadline.get("warn") and deadline.get("sentence"):
            lines.append(f"  {deadline['sentence']}")
    for skip in skips:
        lines.append(f"  {skip['sentence']}")
        output = skip.get("output") or []
        if output:
            lines.append(f"    {skip.get('runner') or 'its runner'}'s last output:")
            lines += [f"    | {line}" for line in output]
    return lines


def runner_lines(runners: list[dict[str, Any]], width: int | None = None) -> list[str]:
    lines = [f"Runners ({len(runners)})"]
    if runners:
        lines += table(RUNNER_HEADERS, runner_rows(runners), width=width, fit=RUNNER_FIT)
    return lines


def render_status(
    document: dict[str, Any], width: int | None = None, paint: Painter | None = None
) -> str:
    """The status as text; with a ``width``, each table fits it (``render.table``); ``paint``
    colours the status words (:func:`status_painter`)."""
    scale_sets = document.get("scale_sets", [])
    runners = document.get("runners", [])
    allowed = sum(int(s.get("max") or 0) for s in scale_sets)
    creating = sum(int(s.get("creating") or 0) for s in scale_sets)
    counted = len(runners) + creating
    being_created = f", {creating} of them being created" if creating else ""
    sections = [
        header_lines(
            document.get("daemon", {}),
            queue_age_text(scale_sets, document.get("daemon", {}).get("now")),
        ),
        scale_set_lines(scale_sets, document.get("daemon", {}).get("now"), width, paint)
        + [f"  {f['sentence']}" for f in document.get("leftovers", [])],
        provider_lines(document.get("providers", []), document.get("skips", []), width, paint),
        runner_lines(runners, width),
        [
            f"{plural(counted, 'runner')}{being_created}; the scale sets allow {allowed} "
            "between them."
        ],
    ]
    return "\n\n".join("\n".join(section) for section in sections) + "\n"
