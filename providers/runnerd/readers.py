"""What the kernel reports: cgroup v2 memory and CPU files, /proc/meminfo, PSI, big programs.

docs/admission.md, "What a job's memory is" and "The host's memory". Parsers are pure functions of
the file text (keys, never positions: the kernel adds keys); the readers below them only open files
under a root, so tests point them at fixture trees in the cgroup v2 format.

- Job memory = memory.current − the file LRU lists (active_file + inactive_file): what the job
  holds without page cache, which the kernel drops before it kills. tmpfs stays counted (shmem
  sits on the anon lists).
- Slice memory = memory.current − inactive_file, as ``docker stats`` counts it, for the
  high-water mark: it errs toward holding starts back.
- What the slice holds for the host guard leaves out reclaimable slab as well.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from runnerd.admission.model import Holder

KIB = 1024


# ---- pure parsers -------------------------------------------------------------------------


def parse_keyed(text: str) -> dict[str, int]:
    """``key value`` lines (memory.stat, memory.events, cpu.stat); unknown keys kept."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            try:
                out[parts[0]] = int(parts[1])
            except ValueError:
                continue
    return out


def parse_limit(text: str) -> int | None:
    """memory.max: bytes, or ``None`` for ``max`` (no limit)."""
    value = text.strip()
    if value == "max" or not value:
        return None
    return int(value)


def parse_cpu_max(text: str) -> float | None:
    """cpu.max ``"400000 100000"`` → 4.0 CPUs; ``max`` → ``None``."""
    parts = text.split()
    if not parts or parts[0] == "max":
        return None
    period = int(parts[1]) if len(parts) > 1 else 100000
    return int(parts[0]) / period


def parse_cpuset(text: str) -> int:
    """cpuset.cpus.effective ``0-3,6`` → 5."""
    count = 0
    for part in text.strip().split(","):
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-")
            count += int(hi) - int(lo) + 1
        else:
            count += 1
    return count


@dataclass(frozen=True, slots=True)
class MemInfo:
    total: int
    available: int


def parse_meminfo(text: str) -> MemInfo:
    values: dict[str, int] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts:
            values[name.strip()] = int(parts[0]) * (KIB if parts[1:] == ["kB"] else 1)
    return MemInfo(values.get("MemTotal", 0), values.get("MemAvailable", values.get("MemFree", 0)))


@dataclass(frozen=True, slots=True)
class Pressure:
    """One PSI file: the share of the last 10 s (percent) and the cumulative stall (µs)."""

    some_avg10: float = 0.0
    full_avg10: float = 0.0
    some_total: int = 0
    full_total: int = 0


def parse_pressure(text: str) -> Pressure:
    found: dict[str, tuple[float, int]] = {}
    for line in text.splitlines():
        parts = line.split()
        if not parts or parts[0] not in ("some", "full"):
            continue
        fields = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
        found[parts[0]] = (float(fields.get("avg10", "0")), int(fields.get("total", "0")))
    some = found.get("some", (0.0, 0))
    full = found.get("full", (0.0, 0))
    return Pressure(some[0], full[0], some[1], full[1])


def parse_status(text: str) -> tuple[str, int]:
    """/proc/<pid>/status → (process name, resident bytes); kernel threads have no VmRSS."""
    name, rss = "", 0
    for line in text.splitlines():
        if line.startswith("Name:"):
            name = line.split(":", 1)[1].strip()
        elif line.startswith("VmRSS:"):
            parts = line.split()
            rss = int(parts[1]) * KIB
    return name, rss


def parse_proc_cgroup(text: str) -> list[str]:
    """/proc/<pid>/cgroup → the cgroup paths, one per hierarchy."""
    return [line.split(":", 2)[2] for line in text.splitlines() if line.count(":") >= 2]


def job_memory(current: int, stat: Mapping[str, int]) -> int:
    """What a job holds without page cache: memory.current − the file LRU lists."""
    return max(0, current - stat.get("active_file", 0) - stat.get("inactive_file", 0))


def slice_memory(current: int, stat: Mapping[str, int]) -> int:
    """The slice as docker stats counts it (the docker/cli rule): current − inactive_file."""
    inactive = stat.get("inactive_file", 0)
    return current - inactive if inactive < current else current


def held_memory(current: int, stat: Mapping[str, int]) -> int:
    """What the runners hold for the host guard: without page cache or reclaimable slab."""
    return max(0, job_memory(current, stat) - stat.get("slab_reclaimable", 0))


def slice_dir(slice_name: str) -> str:
    """systemd nesting: ``a-b.slice`` lives at ``a.slice/a-b.slice``."""
    stem = slice_name.removesuffix(".slice")
    parts = stem.split("-")
    return "/".join("-".join(parts[: i + 1]) + ".slice" for i in range(len(parts)))


# ---- thin reads ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CgroupSample:
    """One read of a cgroup v2 directory; a missing file leaves its field empty."""

    current: int
    stat: Mapping[str, int] = field(default_factory=dict)
    events: Mapping[str, int] = field(default_factory=dict)
    events_local: Mapping[str, int] = field(default_factory=dict)
    limit: int | None = None
    cpu: Mapping[str, int] = field(default_factory=dict)

    @property
    def job_memory(self) -> int:
        return job_memory(self.current, self.stat)

    @property
    def slice_memory(self) -> int:
        return slice_memory(self.current, self.stat)

    @property
    def held(self) -> int:
        return held_memory(self.current, self.stat)

    @property
    def cpu_seconds(self) -> float:
        return self.cpu.get("usage_usec", 0) / 1e6


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError, NotADirectoryError):
        return None


def read_cgroup(directory: str | Path) -> CgroupSample | None:
    """Read a cgroup v2 directory; ``None`` when it has gone (its series just ends)."""
    base = Path(directory)
    current = _read(base / "memory.current")
    if current is None:
        return None
    return CgroupSample(
        current=int(current.strip() or 0),
        stat=parse_keyed(_read(base / "memory.stat") or ""),
        events=parse_keyed(_read(base / "memory.events") or ""),
        events_local=parse_keyed(_read(base / "memory.events.local") or ""),
        limit=parse_limit(_read(base / "memory.max") or "max"),
        cpu=parse_keyed(_read(base / "cpu.stat") or ""),
    )


def read_slice_limit(cgroup_root: str, slice_name: str) -> int | None:
    text = _read(Path(cgroup_root) / slice_dir(slice_name) / "memory.max")
    return parse_limit(text) if text is not None else None


def read_slice_cpus(cgroup_root: str, slice_name: str) -> float | None:
    """The slice's AllowedCPUs (or the host's), fewer when its CPUQuota allows less."""
    base = Path(cgroup_root) / slice_dir(slice_name)
    cpuset = _read(base / "cpuset.cpus.effective")
    cpus = float(parse_cpuset(cpuset)) if cpuset and cpuset.strip() else float(os.cpu_count() or 0)
    quota = _read(base / "cpu.max")
    limit = parse_cpu_max(quota) if quota else None
    if limit is not None:
        cpus = min(cpus, limit)
    return cpus or None


def read_meminfo(proc_root: str = "/proc") -> MemInfo | None:
    text = _read(Path(proc_root) / "meminfo")
    return parse_meminfo(text) if text is not None else None


def read_pressure(proc_root: str = "/proc") -> Pressure | None:
    text = _read(Path(proc_root) / "pressure" / "memory")
    return parse_pressure(text) if text is not None else None


def biggest_holders(
    processes: Iterable[tuple[str, int, list[str]]], slice_name: str, least: int
) -> list[Holder]:
    """Programs outside ``slice_name`` holding ≥ ``least``, largest first (pure)."""
    totals: dict[str, int] = {}
    marker = "/" + slice_name
    for name, rss, cgroups in processes:
        if any(marker + "/" in c or c.endswith(marker) for c in cgroups):
            continue
        totals[name] = totals.get(name, 0) + rss
    found = [Holder(n, b) for n, b in totals.items() if b >= least]
    return sorted(found, key=lambda h: (-h.bytes, h.name))


def read_processes(proc_root: str = "/proc") -> list[tuple[str, int, list[str]]]:
    """(name, resident bytes, cgroup paths) of every process that can be read now."""
    out: list[tuple[str, int, list[str]]] = []
    root = Path(proc_root)
    for entry in root.iterdir():
        if not entry.name.isdigit():
            continue
        status = _read(entry / "status")
        if status is None:
            continue
        name, rss = parse_status(status)
        if rss <= 0:
            continue
        out.append((name, rss, parse_proc_cgroup(_read(entry / "cgroup") or "")))
    return out


def process_tree_rss(pid: int, proc_root: str = "/proc") -> int:
    """Resident bytes of ``pid`` and its descendants, for runners without a cgroup."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in Path(proc_root).iterdir():
        if not entry.name.isdigit():
            continue
        stat = _read(entry / "stat")
        status = _read(entry / "status")
        if stat is None or status is None:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
        rss[int(entry.name)] = parse_status(status)[1]
    total, stack = 0, [pid]
    while stack:
        current = stack.pop()
        total += rss.get(current, 0)
        stack.extend(children.get(current, []))
    return total


def disk_free(path: str) -> int | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize
