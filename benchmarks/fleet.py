"""Benchmark: the whole fleet replayed by ``rungar simulate``'s engine, and what it costs.

Prints JSON lines only (docs/benchmarks.md has the targets). The priority and pack sections
replay each of the seeds 1-4 (``--seeds N``: the first N): every figure is printed for each seed
(``"params": {"seed": N, ...}``), then as the median over the seeds (``"of": "median"``) with
its ``"range"`` (the least and the most of them). A p95 is never quoted from fewer than 20
samples (a p99, 100): its value is then null ("n/a") and ``"samples"`` says how many there were;
a median over seeds of which any had none is null too.

- priority: large runners (16G, priority 10) among small ones (4G) on two 32G hosts kept busy
  by the small, side by side on the same 30 days (``--quick``: 2; ``--days``): every full
  provider held (the default, no suffix), ``hold: soonest_room`` (opt-in: those expecting room
  soonest, ``_soonest_room``), no holds (``no_holds``); the large and small p95 waits,
  how long held room stood empty before its holder took it (``held_room_idle_p95``), the large
  ones' p95 without holds over with them (``large_p95_cut_ratio``), and the small ones' p95 with
  holds over without (``small_p95_ratio``), for spread and for pack with the hosts about 90 %
  busy, and for spread at a lighter load. Each replay is watched for the large-job bound
  (:mod:`rungar.simulate.bound`): as each large job is queued, the earliest it could start under
  any placement from that moment that keeps nothing empty in advance and takes no runner away,
  knowing every job's duration: every runner on a host keeps its room until it ends, a booting
  one until the end of the queued job it takes when it connects; nothing but large runners is
  placed from then on; the large jobs queued before it start first, each on a runner placed as
  early as the hosts' room and the scale set's ``max_runners`` allow, holding its room until its
  job ends. Its p95 on each row's own replay (``large_p95_bound_s``), the row's large p95 over
  it (``large_p95_over_bound``), the no-holds p95 over the bound of the default's replay
  (``large_p95_cut_ratio_bound``), and, over every replay, how many large jobs were checked
  against their own bound (``large_bound_checks``) and how many started before it
  (``large_started_before_bound``: 0, or it is no bound);
- admission: measured vs caps on ``runnerd history generate``'s jobs across two of its 33G
  hosts, each taking several times the 500 jobs a month it was sized for (measured with the
  slots the slice then holds): p95 wait of each, and kills;
- pack: hosts first, a cloud for overflow, on hosts given 60 % of the room the history needs
  (30 days, 10,000 jobs, seeds 1-4):
  the cloud's runner-hours over the least possible given the hosts' slots (every moment's jobs
  beyond the hosts' slots of their profile, each job counted from queued to finished, as if a
  running job could move to a host when a slot frees), and over two bounds for placements in
  which no job waits or moves: the least such a placement can do knowing every duration in
  advance (``least_unmoved``), and the rule "a host when one has a free slot at queue time, else
  the cloud" (``host_first``); the cloud's job hours and runners beside its runner-hours; and
  the same with the cloud's ``overflow_after`` (opt-in) at 1, 2, 3, 4, 5 and 10 minutes: its
  runner-hours, ratio, p95 and p99 wait (``overflow_after_s``); and the same with the cloud's
  ``overflow: when_host_is_later`` (opt-in: the runner waits for a host whose refusal expects
  room sooner than the cloud's typical start plus ``overflow_margin``, the hosts' expected room
  predicted from past durations as runnerd does) at margins of 2, 3 (its default) and 4
  minutes: runner-hours over ``least_unmoved`` and ``host_first``, the p95 and p99 wait and the
  p95 less the default's (``overflow_margin_s``);
- warm pool: a nightly matrix and a weekday morning rush then random daytime jobs on a cloud
  booting in 90 s, replayed with the scale sets' warm pools and without: the p95 wait it saves
  and the runner-hours it costs, per scale set (``p95_wait_saved_s``, ``runner_hours_spent``);
- cost: 30 days of 100,000 jobs (``--quick``: 10,000) on 3 hosts and 2 clouds, in CPU seconds
  of this process (one core; target 60 s) and wall seconds.

``--only SECTION ...`` runs only the sections named (priority, admission, pack, warm_pool, cost).
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import json
import math
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "providers")]
sys.path[:0] = [str(Path(__file__).resolve().parents[1])]

from rungar.config.model import (  # noqa: E402
    DEFAULT_MARGIN,
    HoldChoice,
    Overflow,
    Placement,
    ScaleSetsFile,
)
from rungar.simulate.bound import BoundWatch, checked_bounds  # noqa: E402
from rungar.simulate.history import SimJob  # noqa: E402
from rungar.simulate.models import Models  # noqa: E402
from rungar.simulate.report import Row, nearest_rank, warm_pool_effects  # noqa: E402
from rungar.simulate.run import replay_one, world_for  # noqa: E402
from rungar.simulate.scenario import Scenario  # noqa: E402
from rungar.simulate.synthetic import fragmented_fleet, generated_fleet, rush_fleet  # noqa: E402
from rungar.simulate.world import WorldResult  # noqa: E402

BASELINE = Scenario()


SEEDS = (1, 2, 3, 4)
SECTIONS = ("priority", "admission", "pack", "warm_pool", "cost")  # in the order they run
FEWEST = 20  # samples: a p95 of fewer is not quoted (printed as null, "n/a"); a p99, 100
Figures = dict[str, object]


def emit(metric: str, value: float | None, unit: str, extra: Figures | None = None, /,
         **params: object) -> None:  # fmt: skip
    """One JSON line; ``value`` None (null) when there is no honest figure to give."""
    rounded = None if value is None else round(value, 4)
    line = {"bench": "fleet", "metric": metric, "value": rounded, "unit": unit}
    print(json.dumps({**line, **(extra or {}), "params": params}), flush=True)


def p95(values: Sequence[float]) -> float | None:
    """The nearest-rank p95; None when fewer than :data:`FEWEST` values back it."""
    return nearest_rank(list(values), 0.95) if len(values) >= FEWEST else None


def p99(values: Sequence[float]) -> float | None:
    """The nearest-rank p99; None when fewer than 5 × :data:`FEWEST` values back it."""
    return nearest_rank(list(values), 0.99) if len(values) >= 5 * FEWEST else None


def ratio(over: float | None, under: float | None, floor: float = 1.0) -> float | None:
    if over is None or under is None:
        return None
    return over / max(floor, under)


class Seeds:
    """Figures of one section measured on every seed: each printed as measured (with its
    ``seed``), then :meth:`summarise` prints each one's median over the seeds and its range."""

    VARYING = ("jobs",)  # a seed's own: not a parameter of the median

    def __init__(self) -> None:
        self.values: dict[tuple[str, str], dict[int, float | None]] = {}
        self.params: dict[tuple[str, str], dict[str, object]] = {}
        self.units: dict[tuple[str, str], str] = {}

    def emit(self, seed: int, metric: str, value: float | None, unit: str,
             samples: int | None = None, /, **params: object) -> None:  # fmt: skip
        same = {k: v for k, v in params.items() if k not in self.VARYING}
        key = (metric, json.dumps(same, sort_keys=True))
        self.values.setdefault(key, {})[seed] = value
        self.params[key], self.units[key] = same, unit
        extra: Figures = {} if samples is None else {"samples": samples}
        emit(metric, value, unit, extra, seed=seed, **params)

    def p95(self, seed: int, metric: str, values: Sequence[float], **params: object) -> None:
        self.emit(seed, metric, p95(values), "s", len(values), **params)

    def summarise(self) -> None:
        """The median of each figure over the seeds, with its range; null, with how many seeds
        gave one, when any seed had none."""
        for key, by_seed in self.values.items():
            metric, _ = key
            known = [v for v in by_seed.values() if v is not None]
            whole = len(known) == len(by_seed)
            extra: Figures = {
                "of": "median",
                "range": [round(min(known), 4), round(max(known), 4)] if known else None,
                "seeds": sorted(by_seed),
            }
            if not whole:
                extra["seeds_measured"] = len(known)
            value = statistics.median(known) if whole else None
            emit(metric, value, self.units[key], extra, **self.params[key])


# Small jobs an hour: 30 keeps the two hosts about 90 % busy; 20 leaves room most of the time.
LOADS = ((30.0, (Placement.SPREAD, Placement.PACK)), (20.0, (Placement.SPREAD,)))


def bench_priority(days: float, seeds: Sequence[int]) -> None:
    checks = broken = 0
    for small_per_hour, placements in LOADS:
        for placement in placements:
            figures = Seeds()
            for seed in seeds:
                config, models, jobs = fragmented_fleet(days=days, small_per_hour=small_per_hour,
                                                        seed=seed)  # fmt: skip
                found = compare_holds(figures, seed, config, models, jobs, placement,
                                      days=days, small_per_hour=small_per_hour)  # fmt: skip
                checks, broken = checks + found[0], broken + found[1]
            figures.summarise()
    # Every large job of every replay above, its start against its own bound.
    emit("large_bound_checks", checks, "jobs", days=days, seeds=list(seeds))
    emit("large_started_before_bound", broken, "jobs", days=days, seeds=list(seeds))


HOLD_ROWS = {
    "holds": Scenario(),  # every full provider held: the default
    "soonest_room": Scenario(hold=HoldChoice.SOONEST_ROOM),  # opt-in
    "no_holds": Scenario(no_priority=True),
}


def compare_holds(
    figures: Seeds,
    seed: int,
    config: ScaleSetsFile,
    models: Models,
    jobs: list[SimJob],
    placement: Placement,
    **load: float,
) -> tuple[int, int]:
    """Side by side on the same trace, each replay watched for the large jobs' bound
    (:class:`rungar.simulate.bound.BoundWatch`); returns how many large jobs were checked
    against their bound and how many started before it."""
    params = {"placement": placement.value, **load, "jobs": len(jobs), "hosts": 2}
    checks = broken = 0
    waits: dict[str, WorldResult] = {}
    bounds: dict[str, list[float]] = {}
    for name, scenario in HOLD_ROWS.items():
        world, _ = world_for(replace(scenario, placement=placement), config, models, jobs,
                             BoundWatch)  # fmt: skip
        assert isinstance(world, BoundWatch)
        waits[name] = asyncio.run(world.run())
        bounds[name] = list(world.bounds.values())
        found = checked_bounds(world)
        checks, broken = checks + found[0], broken + found[1]
    free = waits["no_holds"]
    for name, result in waits.items():
        suffix = "" if name == "holds" else f"_{name}"
        figures.p95(seed, f"large_p95_wait_{name}_s", result.waits["large"], **params)
        figures.p95(seed, f"small_p95_wait_{name}_s", result.waits["small"], **params)
        figures.p95(seed, f"large_p95_bound{suffix}_s", bounds[name], **params)
        large, bound = p95(result.waits["large"]), p95(bounds[name])
        figures.emit(seed, f"large_p95_over_bound{suffix}", ratio(large, bound), "x", **params)
        if name == "no_holds":
            continue
        figures.p95(seed, f"held_room_idle_p95{suffix}_s", result.held_room_idle, **params)
        cut = ratio(p95(free.waits["large"]), large)
        figures.emit(seed, "large_p95_cut_ratio" + suffix, cut, "x", **params)
        cost = ratio(p95(result.waits["small"]), p95(free.waits["small"]))
        figures.emit(seed, "small_p95_ratio" + suffix, cost, "x", **params)
        at_bound = ratio(p95(free.waits["large"]), bound)
        figures.emit(seed, "large_p95_cut_ratio_bound" + suffix, at_bound, "x", **params)
    return checks, broken


def bench_admission(jobs: int) -> None:
    for admission in ("caps", "measured"):
        config, models, history = generated_fleet(
            jobs=jobs, days=30, hosts=2, clouds=0, admission=admission, placement="spread",
            slots_share=500 * 2 / jobs,
        )  # fmt: skip
        result = replay_one(BASELINE, config, models, history).result
        waits = [w for ws in result.waits.values() for w in ws]
        kills = sum(b.usage.kills for b in result.backends.values())
        params = {"admission": admission, "jobs": jobs, "hosts": 2, "memory_max": "33G"}
        emit("p95_wait_s", p95(waits), "s", {"samples": len(waits)}, **params)
        emit("max_wait_s", max(waits, default=0.0), "s", **params)
        emit("kills", kills, "jobs", **params)


def least_cloud_hours(history: list[SimJob], slots: dict[str, int]) -> float:
    """Every moment's jobs beyond the hosts' slots of their profile, summed over time: what no
    placement can keep off the cloud without making jobs wait."""
    edges: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for job in history:
        edges[job.label] += [(job.queued_at, 1), (job.queued_at + job.duration, -1)]
    seconds = 0.0
    for label, points in edges.items():
        points.sort()
        running, last = 0, points[0][0]
        for at, step in points:
            seconds += max(0, running - slots[label]) * (at - last)
            running, last = running + step, at
    return seconds / 3600


def host_first_cloud_hours(history: list[SimJob], slots: dict[str, int]) -> float:
    """The cloud hours of placing each job, at its queue time, on a host when one has a free
    slot of its profile and on the cloud otherwise, where it runs to its end: the rule "hosts
    first, never wait, never move" computed directly from the history (job time only)."""
    seconds = 0.0
    ends: dict[str, list[float]] = defaultdict(list)  # a heap of the host jobs' ends, by label
    for job in sorted(history, key=lambda j: j.queued_at):
        running = ends[job.label]
        while running and running[0] <= job.queued_at:
            heapq.heappop(running)
        if len(running) < slots[job.label]:
            heapq.heappush(running, job.queued_at + job.duration)
        else:
            seconds += job.duration
    return seconds / 3600


def least_unmoved_cloud_hours(history: list[SimJob], slots: dict[str, int]) -> float:
    """The least cloud hours of any placement in which no job waits and none moves: each job
    runs where it starts, from queued to finished, and a profile's host slots hold at most
    ``slots`` jobs at once. Knowing every job's duration in advance, which no placement does,
    this keeps the most job time on the hosts (k disjoint chains of the most total length:
    a min-cost flow of ``slots`` units along the time line, a job an edge of cost -duration)."""
    seconds = 0.0
    by_label: dict[str, list[SimJob]] = defaultdict(list)
    for job in history:
        by_label[job.label].append(job)
    for label, mine in by_label.items():
        kept = most_time_in_chains([(j.queued_at, j.queued_at + j.duration) for j in mine],
                                   slots[label])  # fmt: skip
        seconds += sum(j.duration for j in mine) - kept
    return seconds / 3600


def most_time_in_chains(jobs: list[tuple[float, float]], k: int) -> float:
    """The most total length of intervals that ``k`` machines can run, none overlapping on
    one machine: successive shortest paths with potentials on the time line's DAG."""
    times = sorted({t for job in jobs for t in job})
    index = {t: i for i, t in enumerate(times)}
    n = len(times)
    # Edges as [to, capacity, cost, reverse edge index]; the time line has room for k.
    graph: list[list[list[float]]] = [[] for _ in range(n)]

    def edge(a: int, b: int, capacity: float, cost: float) -> None:
        graph[a].append([b, capacity, cost, len(graph[b])])
        graph[b].append([a, 0, -cost, len(graph[a]) - 1])

    for i in range(n - 1):
        edge(i, i + 1, k, 0.0)
    for start, end in jobs:
        if end > start:
            edge(index[start], index[end], 1, -(end - start))
    # Potentials: shortest distances on the DAG (every edge goes forward in time).
    potential = [math.inf] * n
    potential[0] = 0.0
    for a in range(n):
        for b, capacity, cost, _ in graph[a]:
            if capacity > 0 and potential[a] + cost < potential[int(b)]:
                potential[int(b)] = potential[a] + cost
    kept = 0.0
    for _ in range(k):
        distance = [math.inf] * n
        before: list[tuple[int, int] | None] = [None] * n
        distance[0] = 0.0
        frontier = [(0.0, 0)]
        while frontier:
            d, a = heapq.heappop(frontier)
            if d > distance[a]:
                continue
            for i, (b, capacity, cost, _) in enumerate(graph[a]):
                b = int(b)
                reduced = cost + potential[a] - potential[b]
                if capacity > 0 and d + reduced < distance[b] - 1e-9:
                    distance[b] = d + reduced
                    before[b] = (a, i)
                    heapq.heappush(frontier, (distance[b], b))
        if distance[n - 1] == math.inf:
            break
        potential = [p + d if d < math.inf else p for p, d in zip(potential, distance, strict=True)]
        b = n - 1
        while (step := before[b]) is not None:
            a, i = step
            forward = graph[a][i]
            forward[1] -= 1
            graph[b][int(forward[3])][1] += 1
            kept -= forward[2]
            b = a
    return kept


def bench_pack(jobs: int, seeds: Sequence[int]) -> None:
    figures = Seeds()
    for seed in seeds:
        pack_seed(figures, seed, jobs)
    figures.summarise()


def pack_seed(figures: Seeds, seed: int, jobs: int) -> None:
    config, models, history = generated_fleet(
        jobs=jobs, days=30, hosts=2, clouds=1, slots_share=0.6, placement="pack", seed=seed
    )
    result = replay_one(BASELINE, config, models, history).result
    cloud = result.backends["cloud1"].usage.machine_seconds / 3600
    host = result.backends["host1"]
    slots = {name: 2 * p.slots for name, p in host.config.profiles.items()}  # type: ignore[attr-defined]  # a RunnerdHost
    least = least_cloud_hours(history, slots)
    unmoved = least_unmoved_cloud_hours(history, slots)
    greedy = host_first_cloud_hours(history, slots)
    params = {"jobs": jobs, "days": 30, "hosts": 2, "clouds": 1, "host_room": 0.6}

    def put(metric: str, value: float | None, unit: str, **more: object) -> None:
        figures.emit(seed, metric, value, unit, **params, **more)

    put("cloud_runner_hours", cloud, "h")
    put("cloud_job_hours", result.backends["cloud1"].usage.job_seconds / 3600, "h")
    put("cloud_runners", result.backends["cloud1"].usage.created, "runners")
    put("least_cloud_hours", least, "h")
    put("cloud_hours_over_least_ratio", cloud / max(least, 1e-9), "x")
    put("least_unmoved_cloud_hours", unmoved, "h")
    put("cloud_hours_over_least_unmoved_ratio", cloud / max(unmoved, 1e-9), "x")
    put("host_first_cloud_hours", greedy, "h")
    put("cloud_hours_over_host_first_ratio", cloud / max(greedy, 1e-9), "x")
    waits = [w for ws in result.waits.values() for w in ws]
    figures.emit(seed, "p95_wait_s", p95(waits), "s", len(waits), **params)
    figures.emit(seed, "p99_wait_s", p99(waits), "s", len(waits), **params)
    for patience in OVERFLOW_AFTER:  # opt-in: the cloud taken only after that long waiting
        providers = tuple(
            replace(p, overflow_after=patience) if p.name == "cloud1" else p
            for p in config.providers
        )
        waited = replay_one(BASELINE, replace(config, providers=providers), models, history)
        cloud_after = waited.result.backends["cloud1"].usage.machine_seconds / 3600
        waits = [w for ws in waited.result.waits.values() for w in ws]
        put("cloud_runner_hours", cloud_after, "h", overflow_after_s=patience)
        put("cloud_hours_over_least_ratio", cloud_after / max(least, 1e-9), "x",
            overflow_after_s=patience)  # fmt: skip
        put("p95_wait_s", p95(waits), "s", overflow_after_s=patience)
        put("p99_wait_s", p99(waits), "s", overflow_after_s=patience)
    default_p95 = p95([w for ws in result.waits.values() for w in ws])
    for margin in OVERFLOW_MARGINS:  # opt-in: not while a host expects room sooner
        providers = tuple(
            replace(p, overflow=Overflow.WHEN_HOST_IS_LATER, overflow_margin=margin)
            if p.name == "cloud1"
            else p
            for p in config.providers
        )
        waited = replay_one(BASELINE, replace(config, providers=providers), models, history)
        cloud_later = waited.result.backends["cloud1"].usage.machine_seconds / 3600
        waits = [w for ws in waited.result.waits.values() for w in ws]
        later = {"overflow": Overflow.WHEN_HOST_IS_LATER.value, "overflow_margin_s": margin}
        put("cloud_runner_hours", cloud_later, "h", **later)
        put("cloud_hours_over_least_unmoved_ratio", cloud_later / max(unmoved, 1e-9), "x",
            **later)  # fmt: skip
        put("cloud_hours_over_host_first_ratio", cloud_later / max(greedy, 1e-9), "x", **later)
        put("p95_wait_s", p95(waits), "s", **later)
        put("p95_wait_over_default_s", difference(p95(waits), default_p95), "s",
            **later)  # fmt: skip
        put("p99_wait_s", p99(waits), "s", **later)


OVERFLOW_AFTER = (60.0, 120.0, 180.0, 240.0, 300.0, 600.0)
# overflow: when_host_is_later's margins, the default (3m) among them
OVERFLOW_MARGINS = (120.0, DEFAULT_MARGIN, 240.0)


def difference(one: float | None, other: float | None) -> float | None:
    """``one - other``, or None when either is not known."""
    return None if one is None or other is None else one - other


def bench_warm_pool(days: int) -> None:
    config, models, history = rush_fleet(days=days)
    with_pool = replay_one(BASELINE, config, models, history)
    without = replay_one(Scenario("no warm pool", no_warm_pool=True), config, models, history)
    (effect,) = warm_pool_effects([with_pool, Row(without.scenario, without.result,
                                                  without.priced, "without")])  # fmt: skip
    for name, figures in [*effect["scale_sets"].items(), ("all", effect["all"])]:
        params = {"scale_set": name, "days": days, "jobs": len(history), "boot_s": 90,
                  "warm_max": 16}  # fmt: skip
        emit("p95_wait_with_warm_pool_s", figures["p95_wait_with"], "s", **params)
        emit("p95_wait_without_warm_pool_s", figures["p95_wait_without"], "s", **params)
        emit("p95_wait_saved_s", figures["p95_wait_saved_s"], "s", **params)
        emit("runner_hours_spent", figures["runner_hours_spent"], "h", **params)
        waits_with = with_pool.result.waits.get(name) or [
            w for ws in with_pool.result.waits.values() for w in ws
        ]
        waited = sum(1 for w in waits_with if w > 1) / max(1, len(waits_with))
        emit("jobs_waiting_share_with_warm_pool", waited, "ratio", **params)


def bench_cost(jobs: int) -> None:
    started = time.perf_counter()
    config, models, history = generated_fleet(jobs=jobs, days=30, hosts=3, clouds=2)
    emit("generate_s", time.perf_counter() - started, "s", jobs=jobs)
    wall, cpu = time.perf_counter(), time.process_time()
    result = replay_one(BASELINE, config, models, history).result
    cpu = time.process_time() - cpu
    wall = time.perf_counter() - wall
    params = {"jobs": jobs, "days": 30, "hosts": 3, "clouds": 2, "events": result.events}
    emit("replay_cpu_s", cpu, "s", **params)
    emit("replay_wall_s", wall, "s", **params)
    emit("jobs_per_cpu_s", jobs / max(cpu, 1e-9), "1/s", **params)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--quick", action="store_true", help="smaller histories")
    parser.add_argument("--days", type=float, default=0.0,
                        help="days of the priority history (default 30; --quick 2)")  # fmt: skip
    parser.add_argument("--seeds", type=int, default=len(SEEDS), choices=range(1, 5),
                        help="how many of the seeds 1-4 to replay (default all four)")  # fmt: skip
    parser.add_argument("--only", nargs="+", choices=SECTIONS, default=list(SECTIONS),
                        metavar="SECTION",
                        help=f"run only these sections (of {', '.join(SECTIONS)})")  # fmt: skip
    args = parser.parse_args()
    seeds = SEEDS[: args.seeds]
    days = args.days or (2.0 if args.quick else 30.0)
    sections: dict[str, Callable[[], None]] = {
        "priority": lambda: bench_priority(days, seeds),
        "admission": lambda: bench_admission(3000 if args.quick else 8000),
        "pack": lambda: bench_pack(1500 if args.quick else 10000, seeds),
        # Fewer days: the first weekend's learning dominates the p95.
        "warm_pool": lambda: bench_warm_pool(56),
        "cost": lambda: bench_cost(10_000 if args.quick else 100_000),
    }
    for section in SECTIONS:
        if section in args.only:
            timed(section, sections[section])
    return 0


def timed(section: str, run: Callable[[], None]) -> None:
    """Run one section and say how long it took: CPU seconds of this process, and wall."""
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    emit("section_cpu_s", time.process_time() - cpu, "s", section=section)
    emit("section_wall_s", time.perf_counter() - wall, "s", section=section)


if __name__ == "__main__":
    sys.exit(main())
