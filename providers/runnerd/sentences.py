"""What runnerctl, its TUI and the dashboard say of an event and of a job's record, in one
wording."""

from __future__ import annotations

import time
from typing import Any

from rungar.model.units import format_bytes, format_duration
from runnerd.admission import AdmissionRecord, Policy


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
    result = row["result"] or "running"
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
    lines.append(
        f"waited {format_duration(row['slot_wait'])} for a slot, "
        f"{format_duration(row['host_wait'])} for the host, "
        f"{format_duration(row['cpu_wait'])} for CPU"
    )
    return "\n".join(lines)
