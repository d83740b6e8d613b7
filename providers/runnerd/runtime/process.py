"""The ``process`` runtime: each runner is a child process under its memory cap.

Seed 000, "What a job's memory is"; docs/MACHINE-NOTES.md. The runner runs its profile's command
with ``ACTIONS_RUNNER_INPUT_JITCONFIG`` and ``RUNGAR_JITCONFIG`` in its environment, in its own
cgroup where the kernel allows, best first:

- cgroup v2 with the memory controller: ``<slice>/<runner>`` with memory.max, read through
  :mod:`runnerd.readers` (memory.events.local ``oom`` says it met its cap);
- a writable cgroup v1 memory controller: ``memory/<slice>/<runner>`` with
  memory.limit_in_bytes; the kernel kills a runner past it and memory.oom_control counts it;
- neither: its process tree is sampled from /proc, and runnerd kills a runner over its cap
  itself and records it as having met it.

A child is moved into its cgroup by a shell that writes its own pid before ``exec``, so nothing
the runner allocates is charged elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from dataclasses import dataclass
from pathlib import Path

import structlog

from runnerd import readers
from runnerd.runtime.base import Adopted, RunnerSpec, SliceUsage, Usage

log = structlog.get_logger("runnerd.runtime.process")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_ENTER = 'echo $$ > "$0/cgroup.procs" && exec "$@"'


def _write(path: Path, value: str) -> None:
    path.write_text(value)


@dataclass
class _Child:
    spec: RunnerSpec
    process: asyncio.subprocess.Process
    cgroup: Path | None
    waiter: asyncio.Task[int]
    cpu_seconds: float = 0.0
    met_cap: bool = False
    oom_seen: int = 0
    log_file: Path | None = None


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
    ) -> None:
        self.slice = slice_name
        self.proc_root = proc_root
        self.stop_grace = stop_grace
        self.logs = Path(state_dir) / "runners"
        self._children: dict[str, _Child] = {}
        self.mode = "proc"
        self.parent: Path | None = None
        v2 = Path(cgroup_root) / readers.slice_dir(slice_name)
        v1 = Path(memory_v1_root) / slice_name
        if use_cgroups and _controls_memory(v2):
            self.mode, self.parent = "v2", v2
        elif use_cgroups and os.access(memory_v1_root, os.W_OK):
            try:
                v1.mkdir(exist_ok=True)
                self.mode, self.parent = "v1", v1
            except OSError as e:
                log.warning("runtime.cgroup_unusable", path=str(v1), error=str(e))

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
        cgroup = self._make_cgroup(spec) if self.parent is not None else None
        self.logs.mkdir(parents=True, exist_ok=True)
        log_file = self.logs / f"{spec.name}.log"
        env = {**os.environ, **spec.env}
        argv = (
            ["/bin/sh", "-c", _ENTER, str(cgroup), *spec.command] if cgroup else list(spec.command)
        )
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
        waiter = asyncio.get_running_loop().create_task(process.wait())
        self._children[spec.name] = _Child(spec, process, cgroup, waiter, log_file=log_file)
        return spec.name

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
            child.cpu_seconds = max(child.cpu_seconds, self._cpu_seconds(child.process.pid))
        memory, held = self._memory(child)
        if self.mode == "proc" and not exited and memory > child.spec.memory:
            # Without a cgroup nothing else enforces the cap: runnerd does, as the kernel would.
            child.met_cap = True
            log.info("runner.over_cap", runner=handle, memory=memory, cap=child.spec.memory)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.process.pid, signal.SIGKILL)
        return Usage(
            memory=memory,
            held=held,
            cpu_seconds=child.cpu_seconds,
            met_cap=child.met_cap,
            exited=exited,
            exit_code=child.waiter.result() if exited else None,
        )

    def _memory(self, child: _Child) -> tuple[int, int]:
        if child.cgroup is None:
            if child.waiter.done():
                return 0, 0
            rss = readers.process_tree_rss(child.process.pid, self.proc_root)
            return rss, rss
        if self.mode == "v2":
            sample = readers.read_cgroup(child.cgroup)
            if sample is None:
                return 0, 0
            if sample.events_local.get("oom", 0) > 0:
                child.met_cap = True
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
        text = _read_text(Path(self.proc_root) / str(pid) / "stat")
        if not text:
            return 0.0
        fields = text.rsplit(")", 1)[1].split()
        # utime, stime, cutime, cstime: the runner and the children it has reaped.
        return sum(int(v) for v in fields[11:15]) / CLOCK_TICKS

    async def stop(self, handle: str) -> None:
        child = self._children.pop(handle, None)
        if child is None:
            return
        if not child.waiter.done():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.process.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(asyncio.shield(child.waiter), self.stop_grace)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.process.pid, signal.SIGKILL)
                await child.waiter
        if child.cgroup is not None:
            await _remove_when_empty(child.cgroup)

    async def close(self) -> None:
        """Stop every child: a later runnerd cannot adopt a process, so none outlives this one
        (its job is recorded as cancelled); then remove the slice's cgroup if it is empty."""
        for handle in list(self._children):
            await self.stop(handle)
        if self.mode == "v1" and self.parent is not None:
            _remove(self.parent)

    async def slice_usage(self) -> SliceUsage | None:
        if self.parent is None:
            total = 0
            for child in self._children.values():
                if not child.waiter.done():
                    total += readers.process_tree_rss(child.process.pid, self.proc_root)
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
        # A previous runnerd's children died with its session or were orphaned outside any
        # record runnerd can trust; the history marks them lost at start.
        return []

    def pid(self, handle: str) -> int | None:
        child = self._children.get(handle)
        return child.process.pid if child else None


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
