"""What runnerctl, its TUI and the dashboard say of an event and of a job's record, in one
wording."""

from __future__ import annotations

import time
from typing import Any

from rungar.model.units import format_bytes, format_seconds
from runnerd.admission import AdmissionRecord, Policy
from runnerd.figures import job_figures


def render_event(event: dict[str, Any]) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(event["at"]))
    return f"{when}  {event['kind']:<15} {event['message']}"


def job_sentence(row: dict[str, Any]) -> str:
    """A job's record as sentences: what it was, how it ended, what it reserved and why."""
    name = (
        f"{row['repository']} {row['workflow']}/{row['job_name']}"
        if row["repository"]
        else "no job"
    )
    ident = row["job_id"] or row["id"]
    result = row["result"] or (
        "ended; how its job ended waits for Rungar's word" if row["finished_at"] else "running"
    )
    lines = [f"job {ident}: {name}, runner {row['runner']} in profile {row['profile']}: {result}"]
    if row["result"]:
        usage = (
            f"peak {format_bytes(row['peak_memory'])} of its {format_bytes(row['cap_memory'])} cap"
        )
        if row["avg_cpu"] is not None:
            usage += f", average CPU {row['avg_cpu']:.2f}"
        if row["met_cap"]:
            usage += "; it met its cap"
        elif row["killed_for_memory"]:
            usage += "; killed for memory while its own limit held"
        if row["sock_throttled"]:
            usage += f"; its sockets were throttled {row['sock_throttled']} times"
        lines.append(usage)
    record = AdmissionRecord(
        Policy(row["policy"]), row["reserved_memory"], row["basis"], row["budget_free"]
    )
    lines.append(record.line())
    lines.extend(wait_lines(row))
    return "\n".join(lines)


def _clock(at: float | None) -> str:
    return "?" if at is None else time.strftime("%H:%M:%S", time.localtime(at))


def _span(seconds: float | None) -> str:
    return "?" if seconds is None else format_seconds(seconds)


def wait_lines(row: dict[str, Any]) -> list[str]:
    """A job's times and waits, each as docs/runnerd.md defines it, saying which clock."""
    f = job_figures(row)
    lines = []
    job_started = row.get("job_started_at")
    if job_started is not None:
        lines.append(
            f"runnerd's clock: queued {_clock(row['queued_at'])}, runner started "
            f"{_clock(row['started_at'])}, job started {_clock(job_started)}, ended "
            f"{_clock(row['finished_at'])}; ran {_span(f['duration'])}"
        )
        lines.append(
            f"waited {_span(f['wait'])} from its queue time: held back "
            f"{_span(f['slot_wait'])} by this host for a slot, "
            f"{_span(f['host_wait'])} for the host, "
            f"{_span(f['cpu_wait'])} for CPU; its runner idled "
            f"{_span(f['idle'])} before the job queued"
        )
    else:
        lines.append(
            f"runnerd's clock: runner started {_clock(row['started_at'])}, ended "
            f"{_clock(row['finished_at'])}; ran {_span(f['duration'])} (its job's own start "
            "is not known)"
        )
        lines.append(
            f"held back {_span(f['slot_wait'])} for a slot, "
            f"{_span(f['host_wait'])} for the host, "
            f"{_span(f['cpu_wait'])} for CPU"
        )
    if row.get("github_queued_at") or row.get("github_started_at"):
        lines.append(
            f"GitHub's clock: queued {_clock(row.get('github_queued_at'))}, started "
            f"{_clock(row.get('github_started_at'))}, completed "
            f"{_clock(row.get('github_completed_at'))}; waited {_span(f['github_wait'])}, ran "
            f"{_span(f['github_duration'])}"
        )
    return lines


def queue_lines(queue: list[dict[str, Any]]) -> list[str]:
    """The scale sets this host refuses while they wait (docs/runnerd.md), one line each, as
    the dashboard's Queue lists them; "nothing waits" when none does."""
    if not queue:
        return ["queue: nothing waits"]
    return [
        f"queue: {q['scale_set']} waits for {q['waits_for']} since {_clock(q['since'])}: {q['why']}"
        for q in queue
    ]
