"""``runnerd init``: a commented runnerd.toml sized for this host, checked, and the steps left.

It reads the host's memory and CPUs (and the slice's MemoryMax and CPUs when the slice exists),
writes one profile sized from them and turns auto sizing on, then checks the file as
``runnerd check-config`` does and prints what doctor finds and the root steps it leaves to you
(it changes nothing on the host itself):

- the slice's budget: its MemoryMax when it has one, else three quarters of the host's memory
  (written as ``memory_max`` until the slice exists), rounded down to whole G;
- the profile: slots of up to 8G each, one slot per 4 CPUs, as many as the budget holds
  (at least one), each with up to 4 CPUs.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rungar.errors import ConfigError
from rungar.model.units import format_bytes
from runnerd import readers

GiB = 1024**3
SLOT_MEMORY = 8 * GiB
CPUS_PER_SLOT = 4
RUNNER = "/opt/actions-runner/run.sh"


@dataclass(frozen=True, slots=True)
class HostSize:
    memory: int  # MemTotal
    cpus: float  # the slice's CPUs, else the host's
    slice_memory_max: int | None  # the slice's, when it exists and has one


@dataclass(frozen=True, slots=True)
class Sized:
    budget: int
    memory: int
    slots: int
    cpus: float


def size_for(host: HostSize) -> Sized:
    """One profile for this host (pure)."""
    quarter_off = host.memory * 3 // 4 // GiB * GiB
    budget = host.slice_memory_max or quarter_off
    memory = max(256 * 1024**2, min(SLOT_MEMORY, budget) // (256 * 1024**2) * 256 * 1024**2)
    by_cpus = max(1, int(host.cpus // CPUS_PER_SLOT))
    slots = max(1, min(budget // memory, by_cpus))
    cpus = float(min(CPUS_PER_SLOT, max(1, int(host.cpus))))
    return Sized(budget, memory, slots, cpus)


def read_host(slice_name: str, cgroup_root: str, proc_root: str) -> HostSize:
    meminfo = readers.read_meminfo(proc_root)
    if meminfo is None or not meminfo.total:
        raise OSError(f"cannot read the host's memory from {proc_root}/meminfo")
    cpus = readers.read_slice_cpus(cgroup_root, slice_name) or float(os.cpu_count() or 1)
    return HostSize(meminfo.total, cpus, readers.read_slice_limit(cgroup_root, slice_name))


def render(args: argparse.Namespace, host: HostSize, sized: Sized, now: float) -> str:
    when = time.strftime("%Y-%m-%d", time.gmtime(now))
    if host.slice_memory_max:
        budget_line = (
            f'# memory_max = "{format_bytes(sized.budget)}"   # read from the slice\'s MemoryMax'
        )
    else:
        budget_line = (
            f'memory_max = "{format_bytes(sized.budget)}"         # 3/4 of this host\'s '
            f"{format_bytes(host.memory)}; remove it once the slice has this MemoryMax"
        )
    roots = ""
    if args.cgroup_root != "/sys/fs/cgroup":
        roots += f'cgroup_root = "{args.cgroup_root}"\n'
    if args.proc_root != "/proc":
        roots += f'proc_root = "{args.proc_root}"\n'
    return f"""\
# runnerd.toml for {socket.gethostname()}, written by runnerd init on {when}:
# {format_bytes(host.memory)} of memory and {host.cpus:g} CPUs here.
# Check it with `runnerd check-config -c {args.config}`;
# `runnerd doctor` says what the host lacks. config/runnerd.example.toml describes every key.

[host]
slice = "{args.slice}"        # every runner's cgroup lives under it; its MemoryMax is the budget
{budget_line}
admission = "caps"             # each runner reserves its profile's memory; "measured": its
                               # job's predicted peak (try `runnerd simulate` first)
runtime = "process"            # or remove it and set isolation = "sysbox": a container per runner
state_dir = "{args.state_dir}" # history.db, provider.sock, runnerd.sock
dashboard_listen = "127.0.0.1:7477"  # the dashboard on loopback (docs/runnerd-dashboard.md)
{roots}
[sizing]
auto = true                    # runnerd sizes memory, slots and cpus from its job history
margin = 15                    # % over a job's peak
min_jobs = 10                  # runs before peaks become predictions and advice

# Scale sets use it with `runner: {{profile: default}}`, or name a profile after the scale set.
[profiles.default]
# The GitHub Actions runner; it reads its JIT config from ACTIONS_RUNNER_INPUT_JITCONFIG.
command = ["{RUNNER}"]
cpus = {sized.cpus:g}
memory = "{format_bytes(sized.memory)}"                 # each runner's hard limit
slots = {sized.slots}                      # runners at once: {sized.slots} × \
{format_bytes(sized.memory)} within the {format_bytes(sized.budget)} budget
min_memory = "1G"              # auto sizing never lowers memory under this
"""


def root_steps(args: argparse.Namespace, host: HostSize, sized: Sized) -> list[str]:
    steps = []
    if host.slice_memory_max is None:
        steps += [
            f"cp config/systemd/runnerd.slice /etc/systemd/system/{args.slice}",
            f"# set MemoryMax={format_bytes(sized.budget)} in it, then:",
            "systemctl daemon-reload",
        ]
    steps += [
        "cp config/systemd/runnerd.service /etc/systemd/system/",
        f"systemctl enable --now runnerd   # runnerd serve -c {args.config}",
    ]
    return steps


def run_init(args: argparse.Namespace) -> int:
    from runnerd.config import load_config
    from runnerd.ctl import run_doctor
    from runnerd.daemon import check_config

    path = Path(args.config)
    if path.exists() and not args.force:
        print(f"runnerd init: {path} exists; --force replaces it", file=sys.stderr)
        return 2
    try:
        host = read_host(args.slice, args.cgroup_root, args.proc_root)
    except OSError as e:
        print(f"runnerd init: {e}", file=sys.stderr)
        return 1
    sized = size_for(host)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render(args, host, sized, time.time()))
    except OSError as e:
        print(
            f"runnerd init: cannot write {path}: {e.strerror}; -c names another file",
            file=sys.stderr,
        )
        return 1
    print(
        f"wrote {path}: profile default, {sized.slots} × {format_bytes(sized.memory)} "
        f"({sized.cpus:g} CPUs each) in a {format_bytes(sized.budget)} budget; auto sizing on"
    )
    problems, warnings = check_config(str(path))
    for line in problems:
        print(line, file=sys.stderr)
    for line in warnings:
        print(f"warning: {line}", file=sys.stderr)
    if problems:
        return 2
    print(f"{path}: ok")
    try:
        run_doctor(load_config(path), as_json=False)
    except ConfigError as e:  # the check above passed; the file changed under us
        print("\n".join(e.problems), file=sys.stderr)
        return 2
    print("\nAs root, when you are ready (runnerd init runs none of these):")
    for step in root_steps(args, host, sized):
        print(f"  {step}")
    return 0
