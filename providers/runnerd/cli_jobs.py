"""``runnerctl jobs [--since D] [--json]``: the jobs runnerd recorded, as it learnt them.

Each job Rungar removed a runner for, with the conclusion GitHub gave it (docs/learning.md, "How
runnerd learns under Rungar"): what sizing and measured admission read, without opening SQLite. It
reads the history read-only, so it works with or without the daemon. Register it with
``add_jobs_command(subparsers)``; the parser sets ``func(args) -> int``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from rungar.errors import ConfigError
from rungar.model.units import format_bytes, format_seconds, parse_duration
from runnerd.config import load_config
from runnerd.figures import job_figures

COLUMNS = (
    "ID",
    "REPOSITORY",
    "WORKFLOW",
    "JOB",
    "RUNNER",
    "CONCLUSION",
    "PEAK MEM",
    "PEAK CPU",
    "SLOT WAIT",
    "STARTED",
    "DURATION",
)


def add_jobs_command(subparsers: Any) -> None:
    jobs = subparsers.add_parser("jobs", help="the jobs runnerd recorded, with their conclusions")
    jobs.add_argument("--since", default="30d", help="how far back: 12h, 7d, 2w (default 30d)")
    jobs.add_argument("--json", action="store_true", help="print JSON")
    jobs.add_argument("--db", help="the job history (default: the config's [host] history)")
    jobs.set_defaults(func=run_jobs)


def window(text: str) -> float:
    """Seconds in ``--since``: a duration, weeks included. ValueError when it is none."""
    if text.endswith("w"):
        return float(text[:-1]) * 7 * 86400
    return parse_duration(text)


def job_entry(row: dict[str, Any]) -> dict[str, Any]:
    """One recorded job as ``--json`` prints it: sizes in bytes, times in epoch seconds, every
    figure as :func:`runnerd.figures.job_figures` defines it (docs/runnerd.md, "Every figure,
    defined once"): times by runnerd's clock unless named ``github_``."""
    figures = job_figures(row)
    started = float(row["job_started_at"] or row["started_at"])
    return {
        "id": row["job_id"] or str(row["id"]),
        "repository": row["repository"],
        "workflow": row["workflow"],
        "job": row["job_name"],
        "branch": row["branch"],
        "run_id": row["run_id"],
        "runner": row["runner"],
        "profile": row["profile"],
        "conclusion": row["result"],
        "peak_memory": row["peak_memory"],
        "peak_cpu": row["peak_cpu"],
        "avg_cpu": row["avg_cpu"],
        "wait": figures["wait"],
        "slot_wait": figures["slot_wait"],
        "host_wait": figures["host_wait"],
        "cpu_wait": figures["cpu_wait"],
        "idle": figures["idle"],
        "pickup": figures["pickup"],
        "queued": row["queued_at"],
        "runner_started": float(row["started_at"]),
        "started": started,
        "finished": row["finished_at"],
        "duration": figures["duration"],
        "github_queued": row.get("github_queued_at"),
        "github_started": row.get("github_started_at"),
        "github_completed": row.get("github_completed_at"),
        "github_wait": figures["github_wait"],
        "github_duration": figures["github_duration"],
        "clock": "runnerd",
        "exit_code": row["exit_code"],
        "policy": row["policy"],
        "reserved_memory": row["reserved_memory"],
        "basis": row["basis"],
    }


def job_cells(e: dict[str, Any]) -> tuple[str, ...]:
    """One job's row under ``COLUMNS`` (``runnerctl jobs`` and the TUI's Jobs screen)."""
    return (
        str(e["id"]),
        e["repository"] or "-",
        e["workflow"] or "-",
        e["job"] or "-",
        e["runner"],
        e["conclusion"],
        format_bytes(e["peak_memory"]),
        f"{e['peak_cpu']:.2f}" if e["peak_cpu"] is not None else "-",
        format_seconds(e["slot_wait"]),
        time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e["started"])),
        format_seconds(e["duration"]) if e["duration"] is not None else "-",
    )


def render_jobs(entries: list[dict[str, Any]]) -> str:
    if not entries:
        return "no jobs recorded in that time"
    rows = [COLUMNS] + [job_cells(e) for e in entries]
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(COLUMNS))]
    lines = [
        "  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    lines.append(FOOTNOTE)
    return "\n".join(lines)


FOOTNOTE = (
    'By runnerd\'s clock (docs/runnerd.md, "Every figure, defined once"): SLOT WAIT is how long '
    "this host held the job back by refusing its scale set after it was queued; STARTED is when "
    "its runner took it; DURATION runs from then, never the runner's idle time."
)


def run_jobs(args: argparse.Namespace) -> int:
    from runnerd.history import History

    try:
        since = window(args.since)
    except ValueError as e:
        print(f"runnerctl jobs: --since: {e}", file=sys.stderr)
        return 2
    db = args.db
    if not db:
        try:
            db = load_config(args.config).host.history_path()
        except ConfigError as e:
            print("\n".join(e.problems), file=sys.stderr)
            return 2
    if not Path(db).exists():
        print(f"runnerctl: no job history at {db}", file=sys.stderr)
        return 1
    history = History(db, read_only=True)
    try:
        rows = history.recorded_since(time.time() - since)
    finally:
        history.close()
    entries = [job_entry(row) for row in rows]
    print(json.dumps(entries, indent=2) if args.json else render_jobs(entries))
    return 0
