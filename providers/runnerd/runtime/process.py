"""The ``process`` runtime: each runner is a child process under its memory cap.

docs/admission.md, "What a job's memory is". The runner runs its profile's command
with ``ACTIONS_RUNNER_INPUT_JITCONFIG`` and ``RUNGAR_JITCONFIG`` in its environment, in its own
cgroup where the kernel allows, best first:

- cgroup v2 with the memory controller: ``<slice>/<runner>`` with memory.max, read through
  :mod:`runnerd.readers` as the docker runtime reads it: memory.events.local ``oom`` says it
  met its cap, an ``oom_kill`` in memory.events without it that it was killed for memory while
  its own limit held, and memory.events ``sock_throttled`` how often its sockets were held;
- a writable cgroup v1 memory controller: ``memory/<slice>/<runner>`` with
  memory.limit_in_bytes; the kernel kills a runner past it and memory.oom_control counts it;
- neither: its process tree is sampled from /proc, and runnerd kills a runner over its cap
  itself and records it as having met it.

Each runner is a small shell in a session of its own (its pid is the process group runnerd
signals) that moves itself into the runner's cgroup before it starts the command, so nothing
the runner allocates is charged elsewhere. The shell stays the command's parent and writes its
exit status to ``<state_dir>/runners/<name>.exit``: runnerd, which may no longer be the parent,
learns how the runner ended from that file.

Runners outlive a runnerd that crashes. Each is recorded in ``<state_dir>/runners/<name>.json``
(pid, its start time from /proc as identity against pid reuse, cgroup, caps, labels; never its
environment, which holds the JIT config), and a restarted runnerd adopts the ones still alive
(:meth:`ProcessRuntime.adopt`). A graceful stop still stops every runner (:meth:`close`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import structlog

from rungar.model.output import tail_lines
from rungar.stopping import within
from runnerd import readers
from runnerd.runtime.base import Adopted, RunnerSpec, SliceUsage, Usage

log = structlog.get_logger("runnerd.runtime.process")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
OUTPUT_TAIL_BYTES = 64 * 1024  # the end of a runner's log read for its last lines
ADOPTED_POLL = 0.2  # seconds between looks at an adopted runner, which we cannot wait for
# $0 is the exit file, $1 the cgroup (empty for none), then the command. A stop while the shell
# moves into the cgroup ends it there, as it did the exec'd command. Trapped signals (not ignored
# ones) are reset for the command, which gets them from the group signal itself; the trap only
# keeps the shell waiting until the command has ended, to record its status.
_WRAPPER = (
    'if [ -n "$1" ]; then echo $$ > "$1/cgroup.procs" || exit; fi\n'
    "trap : HUP INT TERM\n"
    "shift\n"
    '"$@"\n'
    "status=$?\n"
    'echo $status > "$0"\n'
    "exit $status\n"
)


def _write(path: Path, value: str) -> None:
    path.write_text(value)


@dataclass(frozen=True, slots=True)
class _Record:
    """What ``<name>.json`` holds: enough to find, sample and stop the runner again."""

    name: str
    pid: int  # also its process group
    start_ticks: int | None  # /proc/<pid>/stat field 22; None if it ended before it was read
    cgroup: str | None
    profile: str
    scale_set: str
    cpus: float
    memory: int
    labels: dict[str, str]
    command: list[str]
    started_at: float

    @classmethod
    def parse(cls, data: Any) -> _Record:
        """Raises ``ValueError`` on anything but a record this module wrote."""
        if not isinstance(data, dict) or not isinstance(data.get("labels"), dict):
            raise ValueError("not a runner record")
        if not isinstance(data.get("command"), list):
            raise ValueError("its command is not a list")
        ticks, cgroup = data["start_ticks"], data["cgroup"]
        return cls(
            name=_text(data["name"]),
            pid=_whole(data["pid"], least=1),
            start_ticks=None if ticks is None else _whole(ticks),
            cgroup=None if cgroup is None else _text(cgroup),
            profile=_text(data["profile"]),
            scale_set=_text(data["scale_set"]),
            cpus=float(data["cpus"]),
            memory=_whole(data["memory"]),
            labels={_text(k): _text(v) for k, v in data["labels"].items()},
            command=[_text(part) for part in data["command"]],
            started_at=float(data["started_at"]),
        )


@dataclass
class _Child:
    spec: RunnerSpec
    pid: int
    cgroup: Path | None
    waiter: asyncio.Task[int | None]  # its exit code once it has ended; None when unknown
    cpu_seconds: float = 0.0
    met_cap: bool = False
    killed_for_memory: bool = False  # an oom kill while its own limit held (memory.events)
    sock_throttled: int | None = None  # memory.events; None where the kernel lacks it
    oom_seen: int = 0


class ProcessRuntime:
    kind = "process"

    def __init__(
        self,
        slice_name: str,
        state_dir: str,
        cgroup_root: str = "/sys/fs/cgroup",
        memory_v1_root: str = "/sys/fs/cgroup/memory",
        proc_root: str = "/proc",
        stop_grace: float = 10.0,
        use_cgroups: bool = True,
        term_every: float = 0.5,
    ) -> None:
        self.slice = slice_name
        self.proc_root = proc_root
        self.stop_grace = stop_grace
        self.term_every = term_every
        self.logs = Path(state_dir) / "runners"
        self._children: dict[str, _Child] = {}
        self.mode = "proc"
        self.parent: Path | None = None
        mode, where = cgroup_mode(slice_name, cgroup_root, memory_v1_root, use_cgroups)
        if mode == "v2":
            self.mode, self.parent = "v2", where
        elif mode == "v1" and where is not None:
            try:
                where.mkdir(exist_ok=True)
                self.mode, self.parent = "v1", where
            except OSError as e:
                log.warning("runtime.cgroup_unusable", path=str(where), error=str(e))

    def describe(self) -> str:
        where = {
            "v2": f"cgroup v2 at {self.parent}",
            "v1": f"cgroup v1 memory controller at {self.parent}",
            "proc": "no writable memory cgroup: sampled from /proc, killed over its cap by runnerd",
        }[self.mode]
        return f"process runtime: {where}"

    async def start(self, spec: RunnerSpec) -> str:
        if not spec.command:
            raise RuntimeError(f"profile {spec.profile} has no command to run")
        env = {**os.environ, **spec.env}
        # The shell would only say so in the log; a command that cannot run is a failed start.
        if shutil.which(spec.command[0], path=env.get("PATH", os.defpath)) is None:
            raise RuntimeError(f"cannot run {spec.command[0]}: no such executable")
        cgroup = self._make_cgroup(spec) if self.parent is not None else None
        self.logs.mkdir(mode=0o700, parents=True, exist_ok=True)
        log_file = self.logs / f"{spec.name}.log"
        exit_file = self._exit_file(spec.name)
        exit_file.unlink(missing_ok=True)
        argv = ["/bin/sh", "-c", _WRAPPER, str(exit_file), str(cgroup or ""), *spec.command]
        fd = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=fd,
                stderr=fd,
                start_new_session=True,
            )
        except OSError as e:
            if cgroup is not None:
                _remove(cgroup)
            raise RuntimeError(f"cannot run {spec.command[0]}: {e.strerror}") from e
        finally:
            os.close(fd)
        record = _Record(
            name=spec.name,
            pid=process.pid,
            start_ticks=_start_ticks(self.proc_root, process.pid),
            cgroup=str(cgroup) if cgroup is not None else None,
            profile=spec.profile,
            scale_set=spec.scale_set,
            cpus=spec.cpus,
            memory=spec.memory,
            labels=dict(spec.labels),
            command=list(spec.command),
            started_at=time.time(),
        )
        try:
            self._write_record(record)
        except OSError as e:  # it runs all the same; only a crash of runnerd would lose it
            log.warning("runner.record_unwritten", runner=spec.name, error=str(e))
        waiter = asyncio.get_running_loop().create_task(self._wait_started(spec.name, process))
        self._children[spec.name] = _Child(spec, process.pid, cgroup, waiter)
        return spec.name

    async def last_output(self, handle: str, lines: int) -> list[str]:
        """The tail of the runner's log file (kept after it ends, until its name is reused)."""
        path = self.logs / f"{handle}.log"
        try:
            with path.open("rb") as f:
                size = f.seek(0, os.SEEK_END)
                f.seek(max(0, size - OUTPUT_TAIL_BYTES))
                data = f.read()
        except (OSError, ValueError):
            return []
        return tail_lines(data, lines)

    def _make_cgroup(self, spec: RunnerSpec) -> Path:
        assert self.parent is not None
        path = self.parent / spec.name
        path.mkdir(exist_ok=True)
        if self.mode == "v2":
            _write(path / "memory.max", str(spec.memory))
            if spec.cpus:
                with contextlib.suppress(OSError):
                    _write(path / "cpu.max", f"{int(spec.cpus * 100000)} 100000")
        else:
            _write(path / "memory.limit_in_bytes", str(spec.memory))
        return path

    async def sample(self, handle: str) -> Usage | None:
        child = self._children.get(handle)
        if child is None:
            return None
        exited = child.waiter.done()
        if not exited:
            child.cpu_seconds = max(child.cpu_seconds, self._cpu_seconds(child.pid))
        memory, held = self._memory(child)
        if self.mode == "proc" and not exited and memory > child.spec.memory:
            # Without a cgroup nothing else enforces the cap: runnerd does, as the kernel would.
            child.met_cap = True
            log.info("runner.over_cap", runner=handle, memory=memory, cap=child.spec.memory)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
        return Usage(
            memory=memory,
            held=held,
            cpu_seconds=child.cpu_seconds,
            met_cap=child.met_cap,
            killed_for_memory=child.killed_for_memory and not child.met_cap,
            sock_throttled=child.sock_throttled,
            exited=exited,
            exit_code=child.waiter.result() if exited else None,
        )

    def _memory(self, child: _Child) -> tuple[int, int]:
        if child.cgroup is None:
            if child.waiter.done():
                return 0, 0
            rss = readers.process_tree_rss(child.pid, self.proc_root)
            return rss, rss
        if self.mode == "v2":
            sample = readers.read_cgroup(child.cgroup)
            if sample is None:
                return 0, 0
            # As the docker runtime reads them: memory.events.local oom is its own limit run
            # out; an oom kill without it came from above (the slice); sock_throttled counts
            # the kernel holding its sockets during bad reclaim.
            if sample.events_local.get("oom", 0) > 0:
                child.met_cap = True
            if sample.events.get("oom_kill", 0) > 0:
                child.killed_for_memory = True
            if "sock_throttled" in sample.events:
                child.sock_throttled = sample.events["sock_throttled"]
            return sample.job_memory, sample.held
        usage = _read_int(child.cgroup / "memory.usage_in_bytes")
        stat = readers.parse_keyed(_read_text(child.cgroup / "memory.stat"))
        oom = readers.parse_keyed(_read_text(child.cgroup / "memory.oom_control"))
        if oom.get("oom_kill", 0) > child.oom_seen:
            child.oom_seen = oom["oom_kill"]
            child.met_cap = True
        files = stat.get("total_active_file", 0) + stat.get("total_inactive_file", 0)
        memory = max(0, usage - files)
        return memory, memory

    def _cpu_seconds(self, pid: int) -> float:
        """The wrapper shell's and the command's: the shell counts the command once reaped."""
        proc = Path(self.proc_root)
        children = _read_text(proc / str(pid) / "task" / str(pid) / "children").split()
        total = 0.0
        for each in (pid, *(int(c) for c in children)):
            fields = _stat_fields(_read_text(proc / str(each) / "stat"))
            # utime, stime, cutime, cstime: the process and the children it has reaped.
            total += sum(int(v) for v in fields[11:15]) / CLOCK_TICKS if fields else 0.0
        return total

    async def stop(self, handle: str) -> None:
        child = self._children.pop(handle, None)
        if child is None:
            return
        if not child.waiter.done():
            await self._terminate(child)
            if not child.waiter.done():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)
                await child.waiter
        self._discard_record(handle)
        if child.cgroup is not None:
            await _remove_when_empty(child.cgroup)

    async def _terminate(self, child: _Child) -> None:
        """SIGTERM to the runner's group every ``term_every`` for ``stop_grace``. Again and
        again, because a runner stopped as it starts may take the first: its shell keeps a
        trapped signal from the command it has not started yet."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.stop_grace
        while not child.waiter.done():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGTERM)
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            with contextlib.suppress(TimeoutError):
                await within(asyncio.shield(child.waiter), min(self.term_every, remaining))

    async def close(self) -> None:
        """Stop every child, as a graceful stop of runnerd does (it records their jobs as
        cancelled); only a crash leaves runners for the next runnerd to adopt. Then remove the
        slice's cgroup if it is empty."""
        for handle in list(self._children):
            await self.stop(handle)
        if self.mode == "v1" and self.parent is not None:
            _remove(self.parent)

    async def slice_usage(self) -> SliceUsage | None:
        if self.parent is None:
            total = 0
            for child in self._children.values():
                if not child.waiter.done():
                    total += readers.process_tree_rss(child.pid, self.proc_root)
            return SliceUsage(total, total)
        if self.mode == "v2":
            sample = readers.read_cgroup(self.parent)
            return SliceUsage(sample.slice_memory, sample.held) if sample else None
        usage = _read_int(self.parent / "memory.usage_in_bytes")
        stat = readers.parse_keyed(_read_text(self.parent / "memory.stat"))
        inactive = stat.get("total_inactive_file", 0)
        held = max(0, usage - inactive - stat.get("total_active_file", 0))
        return SliceUsage(usage - inactive if inactive < usage else usage, held)

    async def adopt(self) -> list[Adopted]:
        # A crashed runnerd's runners run on in their own sessions: its records say which. One
        # whose process is gone (or whose pid now names another process) is cleaned up.
        found = []
        for path in sorted(self.logs.glob("*.json")):
            try:
                record = _Record.parse(json.loads(path.read_text()))
            except (OSError, ValueError, KeyError, TypeError) as e:
                log.warning("runner.record_unreadable", path=str(path), error=str(e))
                continue
            if record.name != path.stem:  # its name makes the paths it cleans up
                log.warning("runner.record_unreadable", path=str(path), error="a foreign name")
                continue
            if record.name in self._children:
                continue
            cgroup = self._own_cgroup(record)
            if not _alive(self.proc_root, record.pid, record.start_ticks):
                code = self._ended(record.name, None)
                log.info("runner.ended_unwatched", runner=record.name, exit_code=code)
                if cgroup is not None:
                    await _remove_when_empty(cgroup)
                continue
            spec = RunnerSpec(
                name=record.name,
                profile=record.profile,
                scale_set=record.scale_set,
                image="",
                command=tuple(record.command),
                cpus=record.cpus,
                memory=record.memory,
                labels=record.labels,
                env={},
            )
            waiter = asyncio.get_running_loop().create_task(self._wait_adopted(record))
            self._children[record.name] = _Child(spec, record.pid, cgroup, waiter)
            found.append(
                Adopted(
                    name=record.name,
                    handle=record.name,
                    labels=record.labels,
                    started_at=record.started_at,
                    cpus=record.cpus,
                    memory=record.memory,
                )
            )
        return found

    def _own_cgroup(self, record: _Record) -> Path | None:
        """The record's cgroup if it is one of this slice's: else it is sampled from /proc."""
        if record.cgroup is None or self.parent is None:
            return None
        path = Path(record.cgroup)
        return path if path.parent == self.parent and path.name == record.name else None

    def pid(self, handle: str) -> int | None:
        child = self._children.get(handle)
        return child.pid if child else None

    # ---- records and exit files ---------------------------------------------------------

    def _record_file(self, name: str) -> Path:
        return self.logs / f"{name}.json"

    def _exit_file(self, name: str) -> Path:
        return self.logs / f"{name}.exit"

    def _write_record(self, record: _Record) -> None:
        path = self._record_file(record.name)
        temporary = path.with_name(path.name + ".tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump(asdict(record), out)
        os.replace(temporary, path)

    def _discard_record(self, name: str) -> None:
        for path in (self._record_file(name), self._exit_file(name)):
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)

    def _ended(self, name: str, fallback: int | None) -> int | None:
        """The runner's exit code, from the file its shell wrote (``fallback`` when the shell
        died before it could); its record is no longer needed."""
        text = _read_text(self._exit_file(name)).strip()
        self._discard_record(name)
        if not text.isdigit():
            return fallback
        status = int(text)
        # The shell says 128+N for a command killed by signal N; asyncio says -N, as before.
        return -(status - 128) if 128 < status < 128 + signal.NSIG else status

    async def _wait_started(self, name: str, process: asyncio.subprocess.Process) -> int | None:
        code = await process.wait()
        return self._ended(name, code)

    async def _wait_adopted(self, record: _Record) -> int | None:
        # Not our child: waitpid cannot see it end, /proc can.
        while _alive(self.proc_root, record.pid, record.start_ticks):
            await asyncio.sleep(ADOPTED_POLL)
        return self._ended(record.name, None)


def _stat_fields(text: str) -> list[str]:
    """/proc/<pid>/stat from field 3 (state) on: the name in field 2 may hold spaces."""
    return text.rsplit(")", 1)[1].split() if ")" in text else []


def _start_ticks(proc_root: str, pid: int) -> int | None:
    fields = _stat_fields(_read_text(Path(proc_root) / str(pid) / "stat"))
    return int(fields[19]) if len(fields) > 19 else None  # field 22: clock ticks since boot


def _alive(proc_root: str, pid: int, start_ticks: int | None) -> bool:
    """Whether ``pid`` is still the process recorded: running (not a zombie no one reaps) and
    started when it was."""
    fields = _stat_fields(_read_text(Path(proc_root) / str(pid) / "stat"))
    if len(fields) <= 19 or start_ticks is None:
        return False
    return fields[0] not in ("Z", "X") and int(fields[19]) == start_ticks


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not text")
    return value


def _whole(value: Any, least: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise ValueError(f"{value!r} is not a whole number")
    return value


def cgroup_mode(
    slice_name: str, cgroup_root: str, memory_v1_root: str, use_cgroups: bool = True
) -> tuple[str, Path | None]:
    """Which cgroup runners would go under, worked out without making one: ``v2`` (the slice
    controls memory), ``v1`` (a writable v1 memory controller; the slice's directory is made at
    start) or ``proc``."""
    v2 = Path(cgroup_root) / readers.slice_dir(slice_name)
    if use_cgroups and _controls_memory(v2):
        return "v2", v2
    if use_cgroups and os.access(memory_v1_root, os.W_OK):
        return "v1", Path(memory_v1_root) / slice_name
    return "proc", None


def _controls_memory(path: Path) -> bool:
    controllers = _read_text(path / "cgroup.subtree_control") if path.is_dir() else ""
    return "memory" in controllers.split() and os.access(path, os.W_OK)


def _read_text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _read_int(path: Path) -> int:
    text = _read_text(path).strip()
    return int(text) if text else 0


def _remove(path: Path) -> bool:
    try:
        path.rmdir()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


async def _remove_when_empty(path: Path, attempts: int = 50) -> None:
    """The kernel frees a cgroup a moment after its last process exits."""
    for _ in range(attempts):
        if _remove(path):
            return
        await asyncio.sleep(0.02)
    log.warning("runtime.cgroup_left", path=str(path))
