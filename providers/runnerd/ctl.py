"""``runnerctl``: status, watch, job ID, jobs, sizing, doctor (seed 000; issue 6).

``status`` and ``watch`` ask the daemon over its HTTP/JSON API on ``api_socket``. ``job`` reads
the job history read-only, so it works without the daemon. ``doctor`` reads the host itself:
cgroup v2, the slice, the runtime, and host memory warnings naming the programs that hold it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from rungar.errors import ConfigError
from rungar.model.units import format_bytes, format_duration
from runnerd import readers
from runnerd.admission import AdmissionRecord, HostReading, Limits, Policy
from runnerd.admission import host as hostguard
from runnerd.cli_jobs import add_jobs_command
from runnerd.cli_sizing import add_runnerctl_commands
from runnerd.config import RunnerdConfig, RuntimeKind, load_config

DEFAULT_CONFIG = os.environ.get("RUNNERD_CONFIG", "/etc/runnerd/runnerd.toml")


def fetch_status(socket: str) -> dict[str, Any]:
    transport = httpx.HTTPTransport(uds=socket)
    with httpx.Client(transport=transport, base_url="http://runnerd", timeout=5.0) as client:
        response = client.get("/status")
        response.raise_for_status()
        result: dict[str, Any] = response.json()
        return result


def render_status(status: dict[str, Any]) -> str:
    lines = [status["budget"]]
    for key in ("host", "cpu"):
        if status.get(key):
            lines.append(status[key])
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


def doctor(config: RunnerdConfig) -> list[tuple[str, str]]:
    """(level, sentence) pairs: ok, warning or problem."""
    host = config.host
    found: list[tuple[str, str]] = []
    controllers = Path(host.cgroup_root) / "cgroup.controllers"
    if controllers.exists():
        names = controllers.read_text().split()
        level = "ok" if "memory" in names else "warning"
        found.append((level, f"cgroup v2 at {host.cgroup_root}, controllers: {' '.join(names)}"))
    else:
        found.append(
            ("warning", f"no cgroup v2 at {host.cgroup_root}: job memory is sampled otherwise")
        )
    slice_dir = Path(host.cgroup_root) / readers.slice_dir(host.slice)
    limit = host.memory_max or readers.read_slice_limit(host.cgroup_root, host.slice)
    if slice_dir.is_dir():
        found.append(("ok", f"slice {host.slice} at {slice_dir}"))
    else:
        found.append(("warning", f"slice {host.slice} has no cgroup at {slice_dir}"))
    found.append(
        ("ok", f"MemoryMax {format_bytes(limit)}")
        if limit
        else ("warning", "no MemoryMax: only the host bounds the slice")
    )
    if host.runtime is RuntimeKind.DOCKER:
        present = Path(host.docker_socket).exists()
        found.append(
            (
                "ok" if present else "problem",
                f"docker socket {host.docker_socket}" + ("" if present else " is missing"),
            )
        )
    else:
        from runnerd.runtime.process import ProcessRuntime

        found.append(
            (
                "ok",
                ProcessRuntime(
                    host.slice, host.state_dir, host.cgroup_root, proc_root=host.proc_root
                ).describe(),
            )
        )
    meminfo = readers.read_meminfo(host.proc_root)
    pressure = readers.read_pressure(host.proc_root)
    if meminfo is not None:
        holders = readers.biggest_holders(
            readers.read_processes(host.proc_root), host.slice, host.holder_min
        )
        reading = HostReading(
            0.0,
            meminfo.total,
            meminfo.available,
            pressure.full_avg10 if pressure else 0.0,
            0,
            tuple(holders),
        )
        limits = Limits(
            margin_min=host.margin_min, margin_share=host.margin_share, memory_max=limit
        )
        spare = meminfo.available - hostguard.margin(meminfo.total, limits)
        others = f"; {hostguard.programs(reading)}" if hostguard.outside(reading) else ""
        smallest = min(p.memory for p in config.profiles.values())
        if spare < smallest:
            found.append(
                (
                    "warning",
                    f"the host has {format_bytes(max(0, spare))} to spare, less than the smallest "
                    f"profile's {format_bytes(smallest)}{others}",
                )
            )
        else:
            found.append(("ok", hostguard.host_line(reading, limits, 0)))
        if pressure is not None and pressure.full_avg10 >= host.stall_enter:
            found.append(
                (
                    "warning",
                    f"the host stalls short of memory ({pressure.full_avg10:g}% full pressure); "
                    f"{others.removeprefix('; ') or 'nothing outside the slice holds much'}",
                )
            )
    return found


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="runnerctl", description="Talk to runnerd on this host.")
    p.add_argument("-c", "--config", default=DEFAULT_CONFIG)
    p.add_argument("--socket", default="", help="runnerd's API socket (default: from the config)")
    sub = p.add_subparsers(dest="command", required=True)
    status = sub.add_parser("status", help="the budget, the host line and each runner")
    status.add_argument("--json", action="store_true")
    watch = sub.add_parser("watch", help="status, refreshed")
    watch.add_argument("--interval", type=float, default=2.0)
    job = sub.add_parser("job", help="a job's admission record as a sentence")
    job.add_argument("ident", help="GitHub job id or history row id")
    job.add_argument("--json", action="store_true")
    sub.add_parser("doctor", help="check cgroup v2, the slice, the runtime and host memory")
    add_runnerctl_commands(sub)
    add_jobs_command(sub)
    args = p.parse_args(argv)
    if hasattr(args, "func"):  # sizing [apply|undo], jobs
        code: int = args.func(args)
        return code
    try:
        config = load_config(args.config)
    except ConfigError as e:
        print("\n".join(e.problems), file=sys.stderr)
        return 2
    socket = args.socket or config.host.api_socket_path()
    try:
        if args.command == "status":
            result = fetch_status(socket)
            print(json.dumps(result, indent=2) if args.json else render_status(result))
        elif args.command == "watch":
            while True:
                print("\033[2J\033[H" + render_status(fetch_status(socket)), flush=True)
                time.sleep(args.interval)
        elif args.command == "job":
            return _job(config, args.ident, args.json)
        else:
            found = doctor(config)
            for level, sentence in found:
                print(f"{level}: {sentence}")
            return 1 if any(level == "problem" for level, _ in found) else 0
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
