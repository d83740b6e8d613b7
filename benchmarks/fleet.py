"""Benchmark: the whole fleet replayed by ``rungar simulate``'s engine, and what it costs.

Prints JSON lines only (docs/benchmarks.md has the targets):

- priority: large runners (16G, priority 10) among small ones (4G) on two 32G hosts kept busy
  by the small, side by side on the same trace: every full provider held (the default, no
  suffix), one provider held (``hold_one``), no holds (``no_holds``); the large and small p95
  waits, how long held room stood empty before its holder took it (``held_room_idle_p95``),
  the large ones' p95 without holds over with them (``_cut_ratio``, goal at least 4 at the busy
  load), the least the large ones' p95 could be with nothing kept empty in advance and no
  runner taken away (``large_p95_drain_bound``: as each is queued, how soon some host's busy
  runners end to leave room for it, every idle one gone at once; on the default's states) and
  the cut that would give (``_cut_ratio_bound``), and the small ones' p95 with holds over
  without (``small_p95_ratio``), for spread and for pack with the hosts about 90 % busy, and
  for spread at a lighter load;
- admission: measured vs caps on ``runnerd history generate``'s jobs across two of its 33G
  hosts, each taking several times the 500 jobs a month it was sized for (measured with the
  slots the slice then holds): p95 wait of each, and kills;
- pack: hosts first, a cloud for overflow, on hosts given 60 % of the room the history needs:
  the cloud's runner-hours over the least possible given the hosts' slots (every moment's jobs
  beyond the hosts' slots of their profile, each job counted from queued to finished, as if a
  running job could move to a host when a slot frees), and over two bounds for placements in
  which no job waits or moves: the least such a placement can do knowing every duration in
  advance (``least_unmoved``), and the rule "a host when one has a free slot at queue time, else
  the cloud" (``host_first``); the cloud's job hours and runners beside its runner-hours; and
  the same with the cloud's ``overflow_after`` (opt-in) at 1, 2, 3, 4, 5 and 10 minutes: its
  runner-hours, ratio, p95 and p99 wait (``overflow_after_s``);
- warm pool: a nightly matrix and a weekday morning rush then random daytime jobs on a cloud
  booting in 90 s, replayed with the scale sets' warm pools and without: the p95 wait it saves
  and the runner-hours it costs, per scale set (``p95_wait_saved_s``, ``runner_hours_spent``);
- cost: 30 days of 100,000 jobs (``--quick``: 10,000) on 3 hosts and 2 clouds, in CPU seconds
  of this process (one core; target 60 s) and wall seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import json
import math
import sys
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "providers")]
sys.path[:0] = [str(Path(__file__).resolve().parents[1])]

from rungar.config.model import Placement, ScaleSetsFile  # noqa: E402
from rungar.simulate.history import SimJob  # noqa: E402
from rungar.simulate.models import Models  # noqa: E402
from rungar.simulate.report import Row, nearest_rank, warm_pool_effects  # noqa: E402
from rungar.simulate.run import replay_one  # noqa: E402
from rungar.simulate.scenario import Scenario, backends, configure, jobs_for  # noqa: E402
from rungar.simulate.synthetic import fragmented_fleet, generated_fleet, rush_fleet  # noqa: E402
from rungar.simulate.world import World, WorldResult  # noqa: E402

BASELINE = Scenario()


def emit(metric: str, value: float, unit: str, **params: object) -> None:
    line = {"bench": "fleet", "metric": metric, "value": round(value, 4), "unit": unit}
    print(json.dumps({**line, "params": params}), flush=True)


def p95(waits: list[float]) -> float:
    return nearest_rank(waits, 0.95)


# Small jobs an hour: 30 keeps the two hosts about 90 % busy; 20 leaves room most of the time.
LOADS = ((30.0, (Placement.SPREAD, Placement.PACK)), (20.0, (Placement.SPREAD,)))


def bench_priority(days: float) -> None:
    for small_per_hour, placements in LOADS:
        config, models, jobs = fragmented_fleet(days=days, small_per_hour=small_per_hour)
        for placement in placements:
            compare_holds(config, models, jobs, placement, days, small_per_hour)


def compare_holds(
    config: ScaleSetsFile,
    models: Models,
    jobs: list[SimJob],
    placement: Placement,
    days: float,
    small_per_hour: float,
) -> None:
    """Side by side on the same trace: every full provider held (the default), one held (the
    older rule), no holds (every priority 0)."""
    rows = {
        "holds": Scenario(placement=placement),
        "hold_one": Scenario(placement=placement, hold_one=True),
        "no_holds": Scenario(placement=placement, no_priority=True),
    }
    results = {name: replay_one(s, config, models, jobs).result for name, s in rows.items()}
    drains = drain_bounds(rows["holds"], config, models, jobs)
    params = {"placement": placement.value, "days": days, "jobs": len(jobs), "hosts": 2,
              "small_per_hour": small_per_hour}  # fmt: skip
    for name, result in results.items():
        emit(f"large_p95_wait_{name}_s", p95(result.waits["large"]), "s", **params)
        emit(f"small_p95_wait_{name}_s", p95(result.waits["small"]), "s", **params)
        if name != "no_holds":
            emit(f"held_room_idle_p95_{name}_s", p95(result.held_room_idle), "s", **params)
    free, every, one = results["no_holds"], results["holds"], results["hold_one"]

    def cut(held: WorldResult) -> float:
        return p95(free.waits["large"]) / max(1.0, p95(held.waits["large"]))

    def cost(held: WorldResult) -> float:
        return p95(held.waits["small"]) / max(1.0, p95(free.waits["small"]))

    emit("large_p95_cut_ratio", cut(every), "x", **params)
    emit("large_p95_drain_bound_s", p95(drains), "s", **params)
    emit("large_p95_cut_ratio_bound", p95(free.waits["large"]) / max(1.0, p95(drains)), "x",
         **params)  # fmt: skip
    emit("small_p95_ratio", cost(every), "x", **params)
    emit("large_p95_cut_ratio_hold_one", cut(one), "x", **params)
    emit("small_p95_ratio_hold_one", cost(one), "x", **params)


class DrainWatch(World):
    """A replay that notes, as each large job is queued, how soon some host could have room
    for it at the earliest: no runner placed there again, each idle or booting runner gone at
    once, each busy one at its job's end (a running runner is never taken away)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.drains: list[float] = []

    async def arrive(self, index: int) -> None:
        job = self.jobs[index]
        if job.scale_set == "large":
            self.drains.append(min(self.drain(host, job.label) for host in self.backends))
        await super().arrive(index)

    def drain(self, provider: str, label: str) -> float:
        host = self.backends[provider]
        config = host.config  # type: ignore[attr-defined]  # a RunnerdHost
        need = config.profiles[label].memory
        ends = sorted(
            (
                self.now if r.job is None else r.started + self.jobs[r.job].duration,
                config.profiles[
                    self.jobs[r.job].label if r.job is not None else r.scale_set
                ].memory,
            )
            for r in self.runners.values()
            if r.provider == provider
        )
        free = config.host.memory_max - sum(memory for _, memory in ends)
        at = self.now
        for end, memory in ends:
            if free >= need:
                break
            free, at = free + memory, end
        return at - self.now


def drain_bounds(
    scenario: Scenario, config: ScaleSetsFile, models: Models, jobs: list[SimJob]
) -> list[float]:
    """:class:`DrainWatch`'s bound for each large job, on the states of ``scenario``'s replay:
    no placement that keeps nothing empty in advance and takes no runner away starts the job
    sooner (given those states)."""
    config, models = configure(scenario, config, models)
    paced = jobs_for(scenario, jobs)
    made = backends(scenario, config, models, paced[0].queued_at)
    world = DrainWatch(config, made, paced)
    asyncio.run(world.run())
    return world.drains


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
        emit("p95_wait_s", p95(waits), "s", **params)
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


def bench_pack(jobs: int) -> None:
    config, models, history = generated_fleet(
        jobs=jobs, days=30, hosts=2, clouds=1, slots_share=0.6, placement="pack"
    )
    result = replay_one(BASELINE, config, models, history).result
    cloud = result.backends["cloud1"].usage.machine_seconds / 3600
    host = result.backends["host1"]
    slots = {name: 2 * p.slots for name, p in host.config.profiles.items()}  # type: ignore[attr-defined]  # a RunnerdHost
    least = least_cloud_hours(history, slots)
    unmoved = least_unmoved_cloud_hours(history, slots)
    greedy = host_first_cloud_hours(history, slots)
    params = {"jobs": jobs, "hosts": 2, "clouds": 1, "host_room": 0.6}
    emit("cloud_runner_hours", cloud, "h", **params)
    emit("cloud_job_hours", result.backends["cloud1"].usage.job_seconds / 3600, "h", **params)
    emit("cloud_runners", result.backends["cloud1"].usage.created, "runners", **params)
    emit("least_cloud_hours", least, "h", **params)
    emit("cloud_hours_over_least_ratio", cloud / max(least, 1e-9), "x", **params)
    emit("least_unmoved_cloud_hours", unmoved, "h", **params)
    emit("cloud_hours_over_least_unmoved_ratio", cloud / max(unmoved, 1e-9), "x", **params)
    emit("host_first_cloud_hours", greedy, "h", **params)
    emit("cloud_hours_over_host_first_ratio", cloud / max(greedy, 1e-9), "x", **params)
    waits = [w for ws in result.waits.values() for w in ws]
    emit("p95_wait_s", p95(waits), "s", **params)
    emit("p99_wait_s", nearest_rank(waits, 0.99), "s", **params)
    for patience in OVERFLOW_AFTER:  # opt-in: the cloud taken only after that long waiting
        providers = tuple(
            replace(p, overflow_after=patience) if p.name == "cloud1" else p
            for p in config.providers
        )
        waited = replay_one(BASELINE, replace(config, providers=providers), models, history)
        cloud_after = waited.result.backends["cloud1"].usage.machine_seconds / 3600
        waits = [w for ws in waited.result.waits.values() for w in ws]
        more = {**params, "overflow_after_s": patience}
        emit("cloud_runner_hours", cloud_after, "h", **more)
        emit("cloud_hours_over_least_ratio", cloud_after / max(least, 1e-9), "x", **more)
        emit("p95_wait_s", p95(waits), "s", **more)
        emit("p99_wait_s", nearest_rank(waits, 0.99), "s", **more)


OVERFLOW_AFTER = (60.0, 120.0, 180.0, 240.0, 300.0, 600.0)


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
    args = parser.parse_args()
    bench_priority(0.5 if args.quick else 3.0)
    bench_admission(3000 if args.quick else 8000)
    bench_pack(1500 if args.quick else 10000)
    bench_warm_pool(56)  # fewer days: the first weekend's learning dominates the p95
    bench_cost(10_000 if args.quick else 100_000)
    return 0


if __name__ == "__main__":
    sys.exit(main())
