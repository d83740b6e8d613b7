"""runnerd's Prometheus metrics, served on ``[host] metrics_listen`` (``/metrics``).

Resource and concurrency utilization side by side, so the tuning decision shows on one graph:
concurrency at its peak with the resources low says slots may go up; the resources at their
peak with concurrency low says the jobs are larger than the profile assumes.

- ``runnerd_memory_utilization``: the slice's memory (``memory.current`` less inactive page
  cache, as ``docker stats`` counts it) ÷ its MemoryMax; ``runnerd_slice_memory_bytes`` and
  ``runnerd_slice_memory_max_bytes`` beside it, ``runnerd_memory_reserved_bytes`` what the
  running runners count at against the budget;
- ``runnerd_cpu_utilization``: the slice's CPU time per second over the last sample interval
  ÷ its CPUs; ``runnerd_slice_cpu_seconds_total`` and ``runnerd_slice_cpus`` beside it;
- ``runnerd_io_utilization``: the share of the last 10 s some task of the slice stalled on IO
  (``io.pressure``); ``runnerd_slice_io_bytes_total{direction}`` from ``io.stat``. Both only
  where the slice's cgroup has those files;
- ``runnerd_concurrency_utilization{profile}``: running runners ÷ slots, with
  ``runnerd_runners{profile}`` and ``runnerd_slots{profile}``;
- ``runnerd_admissions_total{profile,policy}`` and ``runnerd_refusals_total{profile,resource}``
  (resource: slots, disk, memory, cpu);
- ``runnerd_prediction_ratio{profile}``: each finished job's peak ÷ what its runner reserved
  (a histogram: above 1, the job went past its reservation).

:mod:`runnerd.metrics_http` serves them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from runnerd import readers

RATIO_BUCKETS = (0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 4.0)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True, slots=True)
class SliceCounters:
    """What the sampler reads of the slice's cgroup besides memory, each tick."""

    at: float
    cpu_seconds: float | None = None
    cpu_utilization: float | None = None  # over the interval since the previous reading
    io_read: int | None = None
    io_write: int | None = None
    io_pressure: float | None = None  # some avg10, percent


def parse_io_stat(text: str) -> tuple[int, int]:
    """io.stat ``8:0 rbytes=… wbytes=… rios=…`` per device → (read bytes, written bytes)."""
    read = written = 0
    for line in text.splitlines():
        for pair in line.split()[1:]:
            key, _, value = pair.partition("=")
            if key == "rbytes" and value.isdigit():
                read += int(value)
            elif key == "wbytes" and value.isdigit():
                written += int(value)
    return read, written


def read_slice_counters(
    cgroup_root: str, slice_name: str, now: float, before: SliceCounters | None, cpus: float | None
) -> SliceCounters:
    base = Path(cgroup_root) / readers.slice_dir(slice_name)
    cpu = _text(base / "cpu.stat")
    cpu_seconds = readers.parse_keyed(cpu).get("usage_usec", 0) / 1e6 if cpu else None
    utilization = None
    if (
        cpu_seconds is not None
        and before is not None
        and before.cpu_seconds is not None
        and now > before.at
        and cpus
    ):
        utilization = max(0.0, cpu_seconds - before.cpu_seconds) / (now - before.at) / cpus
    io = _text(base / "io.stat")
    read, written = parse_io_stat(io) if io is not None else (None, None)
    pressure = _text(base / "io.pressure")
    io_pressure = readers.parse_pressure(pressure).some_avg10 if pressure is not None else None
    return SliceCounters(now, cpu_seconds, utilization, read, written, io_pressure)


def _text(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


class RunnerdMetrics:
    """The counters runnerd increments as it decides, and a collector reading its live state."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.admissions = Counter(
            "runnerd_admissions", "Runners admitted", ["profile", "policy"], registry=r
        )
        self.refusals = Counter(
            "runnerd_refusals", "Runners refused FULL, by resource", ["profile", "resource"],
            registry=r,
        )  # fmt: skip
        self.prediction_ratio = Histogram(
            "runnerd_prediction_ratio",
            "A finished job's peak memory ÷ what its runner reserved",
            ["profile"],
            buckets=RATIO_BUCKETS,
            registry=r,
        )

    def watch(self, figures: Callable[[], LiveFigures]) -> None:
        """Read ``figures`` at each scrape."""
        self.registry.register(_LiveCollector(figures))

    def text(self) -> bytes:
        return generate_latest(self.registry)


@dataclass(frozen=True, slots=True)
class LiveFigures:
    """What the daemon stands at now, read at each scrape
    (:meth:`runnerd.provider.RunnerdProvider.live_figures`)."""

    memory: int | None  # the slice's memory, None unless sampled within fresh_for
    memory_max: int | None
    reserved: int  # what the running runners count at against the budget
    cpus: float | None  # the slice's CPUs
    counters: SliceCounters | None  # None unless read within fresh_for
    cpu_seconds: float | None  # the slice's CPU time, however old
    io: tuple[int, int] | None  # read and written bytes, however old
    running: dict[str, int]  # running runners by profile: the slots they occupy
    slots: dict[str, int]  # each profile's slots
    busy: dict[str, int] = field(default_factory=dict)  # of them, busy (docs/runnerd.md)


class _LiveCollector(Collector):
    def __init__(self, figures: Callable[[], LiveFigures]) -> None:
        self.figures = figures

    def collect(self) -> Iterator[Metric]:
        f = self.figures()

        def gauge(name: str, doc: str, value: float | None) -> Iterator[Metric]:
            if value is not None:
                yield GaugeMetricFamily(name, doc, value=value)

        if f.memory is not None:
            yield from gauge("runnerd_slice_memory_bytes", "The slice's memory", f.memory)
            if f.memory_max:
                yield from gauge(
                    "runnerd_memory_utilization",
                    "The slice's memory ÷ its MemoryMax",
                    f.memory / f.memory_max,
                )
        yield from gauge("runnerd_slice_memory_max_bytes", "The slice's MemoryMax", f.memory_max)
        yield from gauge(
            "runnerd_memory_reserved_bytes", "What running runners count at", f.reserved
        )
        yield from gauge("runnerd_slice_cpus", "The slice's CPUs", f.cpus)
        if f.counters is not None:
            yield from gauge(
                "runnerd_cpu_utilization",
                "The slice's CPU time per second ÷ its CPUs",
                f.counters.cpu_utilization,
            )
            if f.counters.io_pressure is not None:
                yield from gauge(
                    "runnerd_io_utilization",
                    "Share of the last 10 s some task of the slice stalled on IO",
                    f.counters.io_pressure / 100,
                )
        if f.cpu_seconds is not None:
            yield CounterMetricFamily(
                "runnerd_slice_cpu_seconds", "The slice's CPU time", value=f.cpu_seconds
            )
        if f.io is not None:
            io = CounterMetricFamily(
                "runnerd_slice_io_bytes", "The slice's IO (io.stat)", labels=["direction"]
            )
            io.add_metric(["read"], f.io[0])
            io.add_metric(["write"], f.io[1])
            yield io
        running = GaugeMetricFamily("runnerd_runners", "Running runners", labels=["profile"])
        slots = GaugeMetricFamily("runnerd_slots", "Slots", labels=["profile"])
        share = GaugeMetricFamily(
            "runnerd_concurrency_utilization",
            "Running runners ÷ slots: the occupied share",
            labels=["profile"],
        )
        busy = GaugeMetricFamily(
            "runnerd_busy_utilization",
            "Runners whose job has queued ÷ slots: the busy share",
            labels=["profile"],
        )
        for name, profile_slots in f.slots.items():
            count = f.running.get(name, 0)
            running.add_metric([name], count)
            slots.add_metric([name], profile_slots)
            share.add_metric([name], count / profile_slots)
            busy.add_metric([name], f.busy.get(name, 0) / profile_slots)
        yield running
        yield slots
        yield share
        yield busy
