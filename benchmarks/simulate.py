"""Benchmark: ``runnerd simulate`` over a generated 30-day history, and sizing advice.

Prints JSON lines only: the wall seconds to replay 100,000 jobs (``--quick``: 10,000) through
every policy (caps, the candidate slots under caps, measured, cpu ×1 and cpu ×1.5) as the command
does (its latest whole weeks of at most 50,000 jobs; ``--all``: every job), its rows side by side
in worker processes, with each row's own seconds: on the generated host's slice, on one whose CPU
budget holds jobs back at the day's peaks, and on one it overloads all day (thousands of jobs
wait for CPU); and the seconds to compute advice for 50 profiles.

``--row NAME`` and ``--slice CPUS`` (either or both) replay only those rows, one after another in
this process, and print each one's process CPU seconds (``replay_cpu_s``): what to compare, side by
side with another tree's, on a busy machine, and what to profile."""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "providers")]

from runnerd.admission import Limits, PredictionRules  # noqa: E402
from runnerd.config import parse_config  # noqa: E402
from runnerd.history_generate import example_config, generate, write_history  # noqa: E402
from runnerd.simulate.command import limits_of, rules_of  # noqa: E402
from runnerd.simulate.parallel import replay_all, usable_cpus  # noqa: E402
from runnerd.simulate.replay import replay, replayable  # noqa: E402
from runnerd.simulate.rows import ProfileShape, Scenario  # noqa: E402
from runnerd.simulate.sample import MAX_JOBS, latest_weeks  # noqa: E402
from runnerd.simulate.table import candidate_slots, scenarios  # noqa: E402
from runnerd.sizing.advise import advise  # noqa: E402
from runnerd.sizing.runs import SizingRun, open_read_only, read_runs  # noqa: E402

from rungar.model.job_key import JobKey  # noqa: E402

G = 1024**3
DAY = 86400.0
# The generated host keeps up with its jobs (480 CPUs for 100,000 jobs a month): a CPU budget
# holds nothing back; at its busiest the running jobs average about 115 CPUs in all. At a fifth
# of its CPUs the budget holds jobs back at the day's peaks, as the 8-CPU example of
# docs/admission.md does (cpu ×1: a p95 wait of about 10 minutes); at a fifteenth the queue for
# CPU grows all day (waits of 15 hours, thousands of jobs waiting at once): the stress case.
SLICES = (("as generated", 1.0), ("contended", 1 / 5), ("overloaded", 1 / 15))


def emit(metric: str, value: float, unit: str, **params: object) -> None:
    line = {"bench": "simulate", "metric": metric, "value": round(value, 4), "unit": unit}
    print(json.dumps({**line, "params": params}), flush=True)


def bench_replay(
    jobs: int, until: float, row: str | None, slice_cpus: int | None, every_job: bool = False
) -> list[str]:
    """Replay ``jobs`` through every policy as ``runnerd simulate`` does (its rows side by side
    in worker processes), once per slice: the wall time, and each row's own time. With ``row``
    or ``slice_cpus``, only those rows, here, one after another: each one's CPU seconds. Answers
    the rows and slices there were, when none matched."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "history.db"
        write_history(db, generate(jobs, 30, 1, until))
        config = parse_config(example_config(str(db), jobs, 30))
        memory_max = config.host.memory_max or 0
        started = time.perf_counter()
        with open_read_only(db) as conn:
            runs = read_runs(conn, until - 60 * DAY, until)
        emit("read_history_s", time.perf_counter() - started, "s", jobs=jobs)
    shapes = {n: ProfileShape(p.memory, p.cpus) for n, p in config.profiles.items()}
    window = replayable(runs, shapes)
    span = latest_weeks(window, until - 30 * DAY, until, None if every_job else MAX_JOBS)
    replayed = window[len(window) - span.jobs :]
    warm = [r for r in runs if r.finished_at < span.start]
    configured = {n: p.slots for n, p in config.profiles.items()}
    mirror = config.host.mirror_memory
    candidate = candidate_slots(shapes, configured, memory_max, mirror, {})
    rows = scenarios(shapes, configured, candidate, memory_max, mirror, (1.0, 1.5))
    limits, rules = limits_of(config, memory_max), rules_of(config)
    matched, offered = False, []
    for load, share in SLICES:
        cpus = round((config.host.cpus or 0) * share)
        if row is not None or slice_cpus is not None:
            offered.append(f"slice {cpus}")
            for scenario in rows if slice_cpus is None or slice_cpus == cpus else ():
                if row is None or scenario.name == row:
                    replay_cpu(scenario, shapes, replayed, warm, limits, rules, cpus, load)
                    matched = True
            continue
        started = time.perf_counter()
        results = replay_all(rows, shapes, replayed, limits, rules, cpus, warm)
        wall = time.perf_counter() - started
        for result in results:
            emit("replay_s", result.seconds, "s", jobs=len(replayed),
                 policy=result.scenario.name, slice_cpus=cpus,
                 wait_p95_s=round(result.wait_p95), cpu_held=result.cpu_held)  # fmt: skip
        emit("replay_all_policies_s", wall, "s", jobs=len(replayed), days=30,
             weeks_replayed=span.weeks or "all", slice_cpus=cpus,
             load=load, workers=min(len(rows), usable_cpus()),
             one_after_another_s=round(sum(r.seconds for r in results), 2))  # fmt: skip
    return [] if matched or not offered else offered + [f"row {r.name!r}" for r in rows]


def replay_cpu(
    scenario: Scenario,
    shapes: Mapping[str, ProfileShape],
    jobs: Sequence[SizingRun],
    warm: Sequence[SizingRun],
    limits: Limits,
    rules: PredictionRules,
    cpus: int,
    load: str,
) -> None:
    """One row replayed here: its process CPU seconds, which the neighbours' load moves far less
    than its wall time."""
    started = time.process_time()
    result = replay(scenario, shapes, jobs, limits, rules, cpus, warm)
    emit("replay_cpu_s", time.process_time() - started, "s", jobs=len(jobs),
         policy=scenario.name, slice_cpus=cpus, load=load,
         wait_p95_s=round(result.wait_p95), cpu_held=result.cpu_held)  # fmt: skip


def bench_advice(profiles: int, until: float) -> None:
    rng = random.Random(3)
    lines = ["[host]", 'memory_max = "512G"']
    runs = []
    for p in range(profiles):
        lines += [f"[profiles.p{p}]", "cpus = 4", 'memory = "8G"', "slots = 2"]
        for j in range(5):
            key = JobKey(f"p{p}", f"acme/r{p}", "ci", f"job{j}")
            for i in range(80):
                at = until - 29 * DAY + i * 30000 + j
                peak = int(rng.uniform(1, 6) * G)
                runs.append(SizingRun(key, "succeeded", peak, 8 * G, 4.0, at - 600, at, at - 660))
    runs.sort(key=lambda r: r.finished_at)
    config = parse_config("\n".join(lines))
    started = time.perf_counter()
    advise(config, runs, 512 * G, until)
    emit("advice_s", time.perf_counter() - started, "s", profiles=profiles, runs=len(runs))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--row", help="replay only this row (caps, measured, 'cpu ×1', ...)")
    parser.add_argument("--slice", type=int, help="replay only the slice of this many CPUs")
    parser.add_argument("--all", action="store_true", help="replay every job, as simulate --all")
    args = parser.parse_args()
    until = 1_800_000_000.0
    jobs = 10_000 if args.quick else 100_000
    unmatched = bench_replay(jobs, until, args.row, args.slice, args.all)
    if unmatched:
        parser.error("no such row or slice; there are " + ", ".join(unmatched))
    if args.row is None and args.slice is None:
        bench_advice(50, until)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
