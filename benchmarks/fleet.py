"""Benchmark: the whole fleet replayed by ``rungar simulate``'s engine, and what it costs.

Prints JSON lines only (docs/benchmarks.md has the targets):

- priority: large runners (16G, priority 10) among small ones (4G) on two 32G hosts kept busy
  by the small, side by side on the same trace: every full provider held (the default, no
  suffix), one provider held (``hold_one``), no holds (``no_holds``); the large and small p95
  waits, how long held room stood empty before its holder took it (``held_room_idle_p95``),
  the large ones' p95 without holds over with them (``_cut_ratio``, goal at least 4 at the busy
  load), and the small ones' p95 with holds over without (``small_p95_ratio``), for spread and
  for pack with the hosts about 90 % busy, and for spread at a lighter load;
- admission: measured vs caps on ``runnerd history generate``'s jobs across two of its 33G
  hosts, each taking several times the 500 jobs a month it was sized for (measured with the
  slots the slice then holds): p95 wait of each, and kills;
- pack: hosts first, a cloud for overflow, on hosts given 60 % of the room the history needs:
  the cloud's runner-hours over the least possible given the hosts' slots (every moment's jobs
  beyond the hosts' slots of their profile, each job counted from queued to finished);
- warm pool: a nightly matrix and a weekday morning rush then random daytime jobs on a cloud
  booting in 90 s, replayed with the scale sets' warm pools and without: the p95 wait it saves
  and the runner-hours it costs, per scale set (``p95_wait_saved_s``, ``runner_hours_spent``);
- cost: 30 days of 100,000 jobs (``--quick``: 10,000) on 3 hosts and 2 clouds, in CPU seconds
  of this process (one core; target 60 s) and wall seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "providers")]
sys.path[:0] = [str(Path(__file__).resolve().parents[1])]

from rungar.config.model import Placement, ScaleSetsFile  # noqa: E402
from rungar.simulate.history import SimJob  # noqa: E402
from rungar.simulate.models import Models  # noqa: E402
from rungar.simulate.report import Row, nearest_rank, warm_pool_effects  # noqa: E402
from rungar.simulate.run import replay_one  # noqa: E402
from rungar.simulate.scenario import Scenario  # noqa: E402
from rungar.simulate.synthetic import fragmented_fleet, generated_fleet, rush_fleet  # noqa: E402
from rungar.simulate.world import WorldResult  # noqa: E402

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
    emit("small_p95_ratio", cost(every), "x", **params)
    emit("large_p95_cut_ratio_hold_one", cut(one), "x", **params)
    emit("small_p95_ratio_hold_one", cost(one), "x", **params)


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


def bench_pack(jobs: int) -> None:
    config, models, history = generated_fleet(
        jobs=jobs, days=30, hosts=2, clouds=1, slots_share=0.6, placement="pack"
    )
    result = replay_one(BASELINE, config, models, history).result
    cloud = result.backends["cloud1"].usage.machine_seconds / 3600
    host = result.backends["host1"]
    slots = {name: 2 * p.slots for name, p in host.config.profiles.items()}  # type: ignore[attr-defined]  # a RunnerdHost
    least = least_cloud_hours(history, slots)
    params = {"jobs": jobs, "hosts": 2, "clouds": 1, "host_room": 0.6}
    emit("cloud_runner_hours", cloud, "h", **params)
    emit("least_cloud_hours", least, "h", **params)
    emit("cloud_hours_over_least_ratio", cloud / max(least, 1e-9), "x", **params)
    waits = [w for ws in result.waits.values() for w in ws]
    emit("p95_wait_s", p95(waits), "s", **params)


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
    bench_admission(6000 if args.quick else 8000)
    bench_pack(3000 if args.quick else 10000)
    bench_warm_pool(56)  # fewer days: the first weekend's learning dominates the p95
    bench_cost(10_000 if args.quick else 100_000)
    return 0


if __name__ == "__main__":
    sys.exit(main())
