"""Each runner's memory and CPU over time, as the sampler last read them, kept in memory.

The job history keeps a job's peaks, not its samples, so the overview's "memory over its last
minutes" and the job page's charts come from here: one point per sample for each runner, up to
``points`` (older points are thinned to every other one, so a long job keeps its whole life at
half the detail), for the runners of the last ``runners`` jobs. A job runnerd ran before it
started has no series; its page shows its record alone.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol


class Sampled(Protocol):
    """What a runner's state offers the timeline (runnerd.provider.HostedRunner)."""

    name: str
    used: int
    used_at: float
    cpu_seconds: float
    cpu_at: float
    cpu_rate: float | None
    ended_at: float | None


@dataclass
class Series:
    times: list[float] = field(default_factory=list)
    memory: list[int] = field(default_factory=list)
    cpu: list[float | None] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"times": self.times, "memory": self.memory, "cpu": self.cpu}


@dataclass
class SliceSeries:
    """The whole slice, one point per look: memory, CPUs used, and what runners reserve."""

    times: list[float] = field(default_factory=list)
    memory: list[int] = field(default_factory=list)
    cpu: list[float | None] = field(default_factory=list)
    reserved: list[int] = field(default_factory=list)
    reserved_cpu: list[float] = field(default_factory=list)


def _pairwise_max(values: list[Any]) -> list[Any]:
    out = []
    for i in range(0, len(values), 2):
        pair = [v for v in values[i : i + 2] if v is not None]
        out.append(max(pair) if pair else None)
    return out


class Timeline:
    def __init__(self, points: int = 600, runners: int = 200) -> None:
        self.points = points
        self.runners = runners
        self._series: OrderedDict[str, Series] = OrderedDict()
        self.slice = SliceSeries()

    def observe_slice(
        self, at: float, memory: int, cpu: float | None, reserved: int, reserved_cpu: float
    ) -> None:
        """One point of the slice; the oldest goes once ``points`` are kept."""
        s = self.slice
        if s.times and at <= s.times[-1]:
            return
        s.times.append(at)
        s.memory.append(memory)
        s.cpu.append(cpu)
        s.reserved.append(reserved)
        s.reserved_cpu.append(reserved_cpu)
        if len(s.times) > self.points:
            for name in ("times", "memory", "cpu", "reserved", "reserved_cpu"):
                del getattr(s, name)[0]

    def slice_recent(self, since: float) -> dict[str, Any]:
        s = self.slice
        i = next((n for n, t in enumerate(s.times) if t >= since), len(s.times))
        return {
            "times": s.times[i:],
            "memory": s.memory[i:],
            "cpu": s.cpu[i:],
            "reserved": s.reserved[i:],
            "reserved_cpu": s.reserved_cpu[i:],
        }

    def latest_cpu(self, runner: str) -> float | None:
        series = self._series.get(runner)
        return series.cpu[-1] if series and series.cpu else None

    def observe(self, states: Iterable[Sampled]) -> None:
        """Add each running runner's latest sample, once per sample it has."""
        for state in states:
            if state.ended_at is not None or not state.used_at:
                continue
            series = self._series.get(state.name)
            if series is None:
                series = self._series[state.name] = Series()
                while len(self._series) > self.runners:
                    self._series.popitem(last=False)
            if series.times and state.used_at <= series.times[-1]:
                continue  # no new sample since the last look
            # The rate the provider measured for this sample: the one its peak CPU is taken
            # from, so the job page's chart and ``runnerctl jobs`` agree.
            rate = state.cpu_rate
            series.times.append(state.used_at)
            series.memory.append(state.used)
            series.cpu.append(rate)
            if len(series.times) > self.points:
                # Half the detail, every peak kept: each pair becomes its larger value.
                series.times = series.times[::2]
                series.memory = _pairwise_max(series.memory)
                series.cpu = _pairwise_max(series.cpu)

    def series(self, runner: str) -> Series | None:
        return self._series.get(runner)

    def recent(self, runner: str, since: float) -> dict[str, Any]:
        """A runner's points from ``since`` on (the overview's last minutes)."""
        series = self._series.get(runner)
        if series is None:
            return {"times": [], "memory": [], "cpu": []}
        i = next((n for n, t in enumerate(series.times) if t >= since), len(series.times))
        return {"times": series.times[i:], "memory": series.memory[i:], "cpu": series.cpu[i:]}
