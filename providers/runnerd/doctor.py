"""``runnerd doctor`` (and ``runnerctl doctor``, the same checks): what the host lacks, read-only.

Each check is a :class:`Check` (ok, warning or problem, with a sentence). It reads the host and
the history and changes neither: no cgroup is made (the process runtime's choice of cgroup is
worked out, not tried), the Docker Engine is only asked, and the history is read read-only.

- cgroup v2, the slice and its MemoryMax, the runtime (the Docker Engine and the OCI runtime
  ``isolation`` names, when the runtime is docker);
- how many runners of each profile fit, and which of memory, CPU, slots or disk binds first:
  memory is MemoryMax (less the mirror) and what the host's memory leaves the slice, at each
  runner's memory; CPU is the CPU budget at its cpus, with ``cpu_overcommit``; disk is the free
  disk less the reserve, at its footprint;
- the disk short of the reserve and one runner's footprint;
- the host short of memory (less to spare than the smallest profile's memory) or stalling for
  it, naming the programs outside the slice that hold it;
- a profile whose jobs need more than its memory (the sizing check), from the history's recent
  runs; skipped while the history, read without write access, lacks what its ``-wal`` holds.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rungar.model.units import format_bytes
from runnerd import readers
from runnerd.admission import HostReading, Limits, Policy
from runnerd.admission import host as hostguard
from runnerd.config import Profile, RunnerdConfig, RuntimeKind

if TYPE_CHECKING:
    from collections.abc import Sequence

    from runnerd.sizing.runs import SizingRun

OK, WARNING, PROBLEM = "ok", "warning", "problem"
V1_MEMORY = "/sys/fs/cgroup/memory"


@dataclass(frozen=True, slots=True)
class Check:
    level: str
    name: str
    message: str

    def to_json(self) -> dict[str, str]:
        return {"level": self.level, "name": self.name, "message": self.message}


@dataclass(frozen=True, slots=True)
class Capacity:
    """How many runners of one profile fit by each resource, and which binds first."""

    profile: str
    fits: dict[str, int]  # resource → runners; a resource that does not bound is left out
    binding: str
    runners: int

    def sentence(self) -> str:
        parts = ", ".join(f"{resource} {count}" for resource, count in self.fits.items())
        runners = "1 runner" if self.runners == 1 else f"{self.runners} runners"
        return f"{self.profile}: {runners} at once, bound by {self.binding} ({parts})"

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "runners": self.runners,
            "binding": self.binding,
            "fits": self.fits,
        }


@dataclass(frozen=True, slots=True)
class HostFacts:
    """What doctor reads of the host, gathered first so the checks are pure."""

    memory_max: int | None
    slice_cpus: float | None
    slice_exists: bool
    controllers: tuple[str, ...] | None  # None: no cgroup v2 here
    meminfo: readers.MemInfo | None
    full_avg10: float | None
    holders: tuple[Any, ...] = ()
    disk_free: int | None = None
    runtime: tuple[str, str] = (OK, "")  # (level, sentence)
    docker: tuple[str, ...] = field(default=())  # warnings about the Docker Engine


@dataclass(frozen=True, slots=True)
class Report:
    checks: tuple[Check, ...]
    capacity: tuple[Capacity, ...]

    @property
    def binding(self) -> str | None:
        """The resource that binds the most runners, over every profile."""
        if not self.capacity:
            return None
        counts: dict[str, int] = {}
        for c in self.capacity:
            counts[c.binding] = counts.get(c.binding, 0) + 1
        return max(counts, key=lambda k: counts[k])

    @property
    def failed(self) -> bool:
        return any(c.level == PROBLEM for c in self.checks)

    def text(self) -> str:
        return "\n".join(f"{c.level}: {c.message}" for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": not self.failed,
            "binding": self.binding,
            "capacity": [c.to_json() for c in self.capacity],
            "checks": [c.to_json() for c in self.checks],
        }


def process_runtime_line(host_slice: str, cgroup_root: str, memory_v1_root: str) -> str:
    """What the process runtime would use, worked out without making a cgroup."""
    from runnerd.runtime.process import cgroup_mode

    mode, where = cgroup_mode(host_slice, cgroup_root, memory_v1_root)
    return {
        "v2": f"process runtime: cgroup v2 at {where}",
        "v1": f"process runtime: cgroup v1 memory controller at {where}",
        "proc": "process runtime: no writable memory cgroup: sampled from /proc, killed over its "
        "cap by runnerd",
    }[mode]


def gather(config: RunnerdConfig, memory_v1_root: str = V1_MEMORY) -> HostFacts:
    host = config.host
    from runnerd.provider import slice_limits

    memory_max, cpus = slice_limits(config)
    root = Path(host.cgroup_root)
    controllers_file = root / "cgroup.controllers"
    controllers = tuple(controllers_file.read_text().split()) if controllers_file.exists() else None
    meminfo = readers.read_meminfo(host.proc_root)
    pressure = readers.read_pressure(host.proc_root)
    holders: tuple[Any, ...] = ()
    if meminfo is not None:
        processes = readers.read_processes(host.proc_root)
        holders = tuple(readers.biggest_holders(processes, host.slice, host.holder_min))
    if host.runtime is RuntimeKind.DOCKER:
        from runnerd.daemon import docker_warnings

        docker = tuple(docker_warnings(config))
        runtime = (OK, f"docker runtime: Engine API at {host.docker_socket}")
    else:
        docker = ()
        runtime = (OK, process_runtime_line(host.slice, host.cgroup_root, memory_v1_root))
    return HostFacts(
        memory_max=memory_max,
        slice_cpus=cpus,
        slice_exists=(root / readers.slice_dir(host.slice)).is_dir(),
        controllers=controllers,
        meminfo=meminfo,
        full_avg10=pressure.full_avg10 if pressure else None,
        holders=holders,
        disk_free=readers.disk_free(_existing(host.disk_path_or_state())),
        runtime=runtime,
        docker=docker,
    )


def _existing(path: str) -> str:
    """The path, or its nearest existing parent: the state directory may not be made yet."""
    current = Path(path)
    while not current.exists() and current != current.parent:
        current = current.parent
    return str(current)


def capacity(config: RunnerdConfig, facts: HostFacts, profile: Profile) -> Capacity:
    """How many runners of ``profile`` alone fit, by each resource (pure)."""
    host = config.host
    fits = {"slots": profile.slots}
    rooms = []
    if facts.memory_max is not None:
        rooms.append(facts.memory_max - host.mirror_memory)
    if facts.meminfo is not None:
        reading = _reading(facts)
        rooms.append(hostguard.room(reading, _limits(config, facts)))
    if rooms:
        fits["memory"] = max(0, min(rooms)) // profile.memory
    if host.cpu_overcommit is not None and facts.slice_cpus:
        fits["cpu"] = math.floor(facts.slice_cpus * host.cpu_overcommit / profile.cpus + 1e-9)
    if facts.disk_free is not None:
        footprint = profile.disk or host.disk_per_runner
        fits["disk"] = max(0, facts.disk_free - host.disk_reserve) // footprint
    order = ("memory", "cpu", "slots", "disk")
    binding = min(fits, key=lambda k: (fits[k], order.index(k)))
    return Capacity(profile.name, fits, binding, fits[binding])


def _reading(facts: HostFacts) -> HostReading:
    assert facts.meminfo is not None
    return HostReading(
        0.0,
        facts.meminfo.total,
        facts.meminfo.available,
        facts.full_avg10 or 0.0,
        0,
        facts.holders,
    )


def _limits(config: RunnerdConfig, facts: HostFacts) -> Limits:
    host = config.host
    return Limits(
        policy=host.admission,
        memory_max=facts.memory_max,
        mirror=host.mirror_memory,
        margin_min=host.margin_min,
        margin_share=host.margin_share,
        stall_enter=host.stall_enter,
        stall_leave=host.stall_leave,
    )


def checks(config: RunnerdConfig, facts: HostFacts, sizing: list[Check]) -> Report:
    """Every check from the gathered facts and the sizing check's result (pure)."""
    host = config.host
    found: list[Check] = []
    if not Path(config.file).exists():
        found.append(
            Check(WARNING, "config", f"no {config.file}: the host is checked with the defaults; "
                  f"runnerd init -c {config.file} writes one for it")
        )  # fmt: skip
    if facts.controllers is None:
        found.append(
            Check(WARNING, "cgroup", f"no cgroup v2 at {host.cgroup_root}: memory is sampled "
                  "otherwise")
        )  # fmt: skip
    else:
        level = OK if "memory" in facts.controllers else WARNING
        names = " ".join(facts.controllers)
        found.append(
            Check(level, "cgroup", f"cgroup v2 at {host.cgroup_root}, controllers: {names}")
        )
    slice_path = Path(host.cgroup_root) / readers.slice_dir(host.slice)
    if facts.slice_exists:
        found.append(Check(OK, "slice", f"slice {host.slice} at {slice_path}"))
    else:
        found.append(Check(WARNING, "slice", f"slice {host.slice} has no cgroup at {slice_path}"))
    if facts.memory_max:
        found.append(Check(OK, "memory_max", f"MemoryMax {format_bytes(facts.memory_max)}"))
    else:
        level = PROBLEM if host.admission is Policy.MEASURED else WARNING
        found.append(Check(level, "memory_max", "no MemoryMax: only the host bounds the slice"))
    found.append(Check(facts.runtime[0], "runtime", facts.runtime[1]))
    found += [Check(WARNING, "docker", w) for w in facts.docker]
    if not config.profiles:
        found.append(Check(WARNING, "profiles", "no [profiles.NAME]: every runner is refused"))
    caps = tuple(capacity(config, facts, p) for p in config.profiles.values())
    for c in caps:
        level = PROBLEM if c.runners == 0 else OK
        found.append(Check(level, "capacity", c.sentence()))
    found += _disk(config, facts)
    found += _host_memory(config, facts)
    found += sizing
    return Report(tuple(found), caps)


def _disk(config: RunnerdConfig, facts: HostFacts) -> list[Check]:
    host = config.host
    if facts.disk_free is None or not config.profiles:
        return []
    footprint = min(p.disk or host.disk_per_runner for p in config.profiles.values())
    needs = host.disk_reserve + footprint
    where = host.disk_path_or_state()
    if facts.disk_free < needs:
        return [
            Check(
                WARNING,
                "disk",
                f"the disk is short at {where}: {format_bytes(facts.disk_free)} free, less than "
                f"the {format_bytes(host.disk_reserve)} reserve and one runner's "
                f"{format_bytes(footprint)}",
            )
        ]
    return [Check(OK, "disk", f"{format_bytes(facts.disk_free)} free at {where}")]


def _host_memory(config: RunnerdConfig, facts: HostFacts) -> list[Check]:
    if facts.meminfo is None:
        return []
    reading = _reading(facts)
    limits = _limits(config, facts)
    spare = facts.meminfo.available - hostguard.margin(facts.meminfo.total, limits)
    others = hostguard.programs(reading)
    found = []
    smallest = min((p.memory for p in config.profiles.values()), default=0)
    if config.profiles and spare < smallest:
        found.append(
            Check(
                WARNING,
                "host_memory",
                f"the host is short of memory: {format_bytes(max(0, spare))} to spare, less than "
                f"the smallest profile's {format_bytes(smallest)}"
                + (f"; {others}" if others else ""),
            )
        )
    else:
        found.append(Check(OK, "host_memory", hostguard.host_line(reading, limits, 0)))
    if facts.full_avg10 is not None and facts.full_avg10 >= config.host.stall_enter:
        found.append(
            Check(
                WARNING,
                "host_stall",
                f"the host stalls short of memory ({facts.full_avg10:g}% full pressure); "
                + (others or "nothing outside the slice holds much"),
            )
        )
    return found


def sizing_checks(config: RunnerdConfig, memory_max: int | None, now: float) -> list[Check]:
    """Profiles whose jobs need more than their memory, from the history read read-only."""
    from runnerd.sizing.advise import Action, advise
    from runnerd.sizing.runs import DAY, open_read_only, read_runs

    path = Path(config.host.history_path())
    if not path.exists():
        return [Check(OK, "sizing", f"no job history at {path} yet")]
    stale: list[str] = []
    try:
        with open_read_only(path, stale.append) as db:
            runs = read_runs(db, now - 30 * DAY, now)
    except Exception as e:  # a history this check cannot read must not stop the others
        return [Check(WARNING, "sizing", f"the job history at {path} cannot be read: {e}")]
    if stale:
        return [Check(WARNING, "sizing", f"sizing check skipped: {stale[0]}")]
    found = []
    for advice in advise(config, runs, memory_max, now):
        heavy = [j for j in advice.jobs if j.need > advice.memory]
        if (advice.need is not None and advice.need > advice.memory) or heavy:
            need = max([advice.need or 0, *(j.need for j in heavy)])
            names = ", ".join(
                f"{j.key.repository} {j.key.workflow}/{j.key.job}"
                for j in sorted(heavy, key=lambda j: -j.need)[:3]
            )
            found.append(
                Check(
                    WARNING,
                    "sizing",
                    f"profile {advice.profile}: its jobs need {format_bytes(need)}, more than "
                    f"its memory of {format_bytes(advice.memory)}"
                    + (f" ({names})" if names else "")
                    + (
                        f"; runnerctl sizing apply {advice.profile} raises it"
                        if advice.action is Action.RAISE
                        else "; no run met it, so sizing keeps it: the room for page cache "
                        "([sizing] page_cache_room) is what puts the need over it"
                    ),
                )
            )
    if not found:
        found.append(Check(OK, "sizing", f"every profile's jobs fit its memory ({len(runs)} runs)"))
    pressure = memory_pressure(runs, now - PRESSURE_WINDOW)
    if pressure:
        found.append(Check(WARNING, "memory_pressure", pressure))
    return found


PRESSURE_WINDOW = 7 * 86400.0


def memory_pressure(runs: Sequence[SizingRun], since: float) -> str:
    """The memory pressure insight: the repositories whose jobs' downloads the kernel held to a
    trickle (memory.events ``sock_throttled``) since ``since``, most throttled first; empty
    when none were."""
    by_repository: dict[str, tuple[int, int]] = {}
    for run in runs:
        if run.finished_at >= since and run.sock_throttled:
            times, count = by_repository.get(run.key.repository, (0, 0))
            by_repository[run.key.repository] = (times + run.sock_throttled, count + 1)
    if not by_repository:
        return ""
    named = sorted(by_repository.items(), key=lambda kv: -kv[1][0])
    parts = [
        f"{repository} ({times} {'time' if times == 1 else 'times'} in {count} "
        f"{'run' if count == 1 else 'runs'})"
        for repository, (times, count) in named[:3]
    ]
    more = f" and {len(named) - 3} more" if len(named) > 3 else ""
    return (
        "memory pressure slowed the downloads of jobs of " + ", ".join(parts) + more + " in "
        "the last 7 days: the kernel throttled their sockets while reclaim at their caps or on "
        "the host went badly; more memory for their profile, or less for the host's other "
        "programs, gives page cache room"
    )


def doctor(config: RunnerdConfig, now: float | None = None) -> Report:
    facts = gather(config)
    when = time.time() if now is None else now
    return checks(config, facts, sizing_checks(config, facts.memory_max, when))
