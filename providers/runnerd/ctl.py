"""``runnerctl``: status, watch, tui, job ID, jobs, sizing, doctor (docs/runnerd.md).

``status``, ``watch`` and ``tui`` ask the daemon over its HTTP/JSON API on ``api_socket``;
``tui`` (:mod:`runnerd.tui`) is imported only when asked for, so the other commands do not load
Textual. ``job`` reads the job history read-only, so it works without the daemon.
``dashboard`` prints the dashboard's login link. ``doctor`` reads the host itself: cgroup v2, the
slice, the runtime, and host memory warnings naming the programs that hold it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from rungar.errors import ConfigError
from rungar.model.units import format_bytes
from runnerd.cli_jobs import add_jobs_command
from runnerd.cli_sizing import add_runnerctl_commands
from runnerd.config import RunnerdConfig, load_config
from runnerd.dashboard.login import add_dashboard_command
from runnerd.sentences import job_sentence, queue_lines, render_event

DEFAULT_CONFIG = os.environ.get("RUNNERD_CONFIG", "/etc/runnerd/runnerd.toml")


def fetch_status(socket: str) -> dict[str, Any]:
    transport = httpx.HTTPTransport(uds=socket)
    with httpx.Client(transport=transport, base_url="http://runnerd", timeout=5.0) as client:
        response = client.get("/status")
        response.raise_for_status()
        result: dict[str, Any] = response.json()
        return result


def fetch_events(socket: str, after: int = 0, wait: float = 0.0) -> list[dict[str, Any]]:
    transport = httpx.HTTPTransport(uds=socket)
    with httpx.Client(
        transport=transport, base_url="http://runnerd", timeout=wait + 10.0
    ) as client:
        response = client.get("/events", params={"after": after, "wait": wait})
        response.raise_for_status()
        events: list[dict[str, Any]] = response.json()["events"]
        return events


def follow_events(socket: str, after: int = 0, wait: float = 25.0) -> Iterator[dict[str, Any]]:
    """Every event after ``after``, then each new one as it comes (``runnerctl events -f``)."""
    while True:
        for event in fetch_events(socket, after, wait):
            after = max(after, int(event["id"]))
            yield event


def render_status(status: dict[str, Any]) -> str:
    lines = [status["budget"]]
    for key in ("host", "cpu"):
        if status.get(key):
            lines.append(status[key])
    lines.extend(queue_lines(status.get("queue") or []))
    runners = status["runners"]
    if not runners:
        lines.append("no runners")
        return "\n".join(lines)
    header = ("RUNNER", "PROFILE", "SCALE SET", "STATE", "RESERVED", "USED", "CAP", "JOB")
    rows = [header] + [
        (
            r["name"],
            r["profile"],
            r["scale_set"],
            r["state"],
            format_bytes(r["counted"]),
            format_bytes(r["used"]),
            format_bytes(r["cap"]),
            r["job"] or "-",
        )
        for r in runners
    ]
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(header))]
    for row in rows:
        lines.append("  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


def doctor_config(path: str) -> RunnerdConfig:
    """The config doctor checks the host with: the file, or the defaults when there is none
    yet (doctor says so), so a host can be checked before ``runnerd init``."""
    from runnerd.config import parse_config

    return load_config(path) if Path(path).exists() else parse_config("", path)


def run_doctor(config: RunnerdConfig, as_json: bool) -> int:
    """``runnerctl doctor`` and ``runnerd doctor``: the same checks, read-only."""
    from runnerd.doctor import doctor

    report = doctor(config)
    print(json.dumps(report.to_json(), indent=2) if as_json else report.text())
    return 1 if report.failed else 0


def parser() -> argparse.ArgumentParser:
    """runnerctl's command line: its own commands, sizing's, jobs and the dashboard's."""
    p = argparse.ArgumentParser(prog="runnerctl", description="Talk to runnerd on this host.")
    p.add_argument("-c", "--config", default=DEFAULT_CONFIG)
    p.add_argument("--socket", default="", help="runnerd's API socket (default: from the config)")
    sub = p.add_subparsers(dest="command", required=True)
    status = sub.add_parser("status", help="the budget, the host line, the queue and each runner")
    status.add_argument("--json", action="store_true")
    watch = sub.add_parser("watch", help="status, refreshed")
    watch.add_argument("--interval", type=float, default=2.0)
    tui = sub.add_parser(
        "tui",
        help="full screen: status (live), Sizing with a to apply, job detail; q quits",
        description="runnerd full screen. Status screen: Enter a runner's job, s Sizing, "
        "j Jobs, w watch on/off, r refresh. Sizing: a applies the selected advice after "
        "asking (the same check as runnerctl sizing apply). Escape goes back; q quits.",
    )
    tui.add_argument(
        "--interval", type=float, default=2.0, help="seconds between refreshes (default 2)"
    )
    tui.add_argument(
        "--no-watch", action="store_true", help="start with watch mode off (w turns it on)"
    )
    job = sub.add_parser("job", help="a job's admission record as a sentence")
    job.add_argument("ident", help="GitHub job id or history row id")
    job.add_argument("--json", action="store_true")
    doctor = sub.add_parser(
        "doctor", help="what the host lacks: the slice, the runtime, memory, CPU, slots, disk"
    )
    doctor.add_argument("--json", action="store_true")
    events = sub.add_parser("events", help="runnerd's events (sizing.changed, ...)")
    events.add_argument("-f", "--follow", action="store_true", help="follow new events")
    events.add_argument("--after", type=int, default=0, help="only events after this id")
    events.add_argument("--json", action="store_true", help="one JSON object a line")
    add_runnerctl_commands(sub)
    add_jobs_command(sub)
    add_dashboard_command(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if hasattr(args, "func"):  # sizing [apply|undo], jobs
        code: int = args.func(args)
        return code
    try:
        config = (
            doctor_config(args.config) if args.command == "doctor" else load_config(args.config)
        )
    except ConfigError as e:
        print("\n".join(e.problems), file=sys.stderr)
        return 2
    socket = args.socket or config.host.api_socket_path()
    if args.command == "tui":
        if args.interval <= 0:
            print("runnerctl tui: --interval must be more than 0", file=sys.stderr)
            return 2
        from runnerd.tui import run_tui

        return run_tui(args.config, socket, args.interval, not args.no_watch)
    try:
        if args.command == "status":
            result = fetch_status(socket)
            print(json.dumps(result, indent=2) if args.json else render_status(result))
        elif args.command == "watch":
            while True:
                print("\033[2J\033[H" + render_status(fetch_status(socket)), flush=True)
                time.sleep(args.interval)
        elif args.command == "events":
            listed = (
                follow_events(socket, args.after)
                if args.follow
                else iter(fetch_events(socket, args.after))
            )
            for event in listed:
                print(json.dumps(event) if args.json else render_event(event), flush=True)
        elif args.command == "job":
            return _job(config, args.ident, args.json)
        else:
            return run_doctor(config, args.json)
    except httpx.HTTPError as e:
        print(f"runnerctl: runnerd does not answer on {socket}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    return 0


def _job(config: RunnerdConfig, ident: str, as_json: bool) -> int:
    from runnerd.history import History

    path = config.host.history_path()
    if not Path(path).exists():
        print(f"runnerctl: no job history at {path}", file=sys.stderr)
        return 1
    history = History(path, read_only=True)
    try:
        row = history.job(ident)
    finally:
        history.close()
    if row is None:
        print(f"runnerctl: no job {ident} in {path}", file=sys.stderr)
        return 1
    print(json.dumps(row, indent=2) if as_json else job_sentence(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
