"""runnerd admission: decisions per second with 200 running runners and a 100,000-job history,
and the sampler's CPU cost per running runner.

A decision is what a Create costs runnerd before the runtime: the runner's prediction from its
scale set's queued jobs (three hints) and the pure admission decision over every running runner.
The sampler cost reads 200 runner cgroups in the cgroup v2 format (memory.current, memory.stat,
memory.events, memory.events.local, memory.max, cpu.stat) from a temporary tree, as the docker
runtime and a cgroup v2 process runtime do every 2 s.

    python benchmarks/admission.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

from runnerd import readers
from runnerd.admission import (
    Candidate,
    GuardState,
    HostReading,
    Limits,
    Policy,
    Running,
    SliceReading,
    decide,
)
from runnerd.admission.model import CANCELLED, FAILURE, SUCCESS, Margin
from runnerd.admission.predict import PredictionRules
from runnerd.history import History, JobEnd, JobKey, JobStart
from runnerd.predictor import Predictor

from rungar.model.machine import JobHint

G = 1024**3
M = 1024**2
DAY = 86400.0
PROFILES = {
    "node": (7 * G, 8.0),
    "jvm": (14 * G, 8.0),
    "small": (3 * G, 2.0),
    "images": (12 * G, 16.0),
}


def emit(metric: str, value: float, unit: str, **params: object) -> None:
    print(
        json.dumps(
            {
                "bench": "admission",
                "metric": metric,
                "value": round(value, 3),
                "unit": unit,
                "params": params,
            }
        )
    )


def build_history(path: Path, jobs: int, keys: int, now: float, rng: random.Random) -> list[JobKey]:
    history = History(path)
    names = list(PROFILES)
    all_keys = [
        JobKey(names[i % len(names)], f"org/repo{i % 40}", f"wf{i % 7}", f"job{i}")
        for i in range(keys)
    ]
    base = {k: rng.uniform(0.3, 0.8) * PROFILES[k.profile][0] for k in all_keys}
    rows = []
    for i in range(jobs):
        key = all_keys[rng.randrange(keys)]
        cap = PROFILES[key.profile][0]
        finished = now - 30 * DAY + 30 * DAY * i / jobs
        roll = rng.random()
        result = SUCCESS if roll < 0.9 else FAILURE if roll < 0.97 else CANCELLED
        peak = int(min(cap, base[key] * rng.uniform(0.8, 1.2)))
        met_cap = rng.random() < 0.002
        start = JobStart(
            f"r{i}",
            key.profile,
            key.profile,
            cap,
            PROFILES[key.profile][1],
            "measured",
            peak,
            1.0,
            "",
            None,
            None,
            finished - 600,
        )
        rows.append(
            (
                start,
                key,
                JobEnd(result, peak, rng.uniform(0.2, 3.0), met_cap, False, None, finished),
            )
        )
    history.insert_finished(rows)
    history.close()
    return all_keys


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    jobs = 20_000 if args.quick else 100_000
    running_count = 200
    decisions = 2_000 if args.quick else 20_000
    rng = random.Random(7)
    now = 1_800_000_000.0
    with tempfile.TemporaryDirectory() as tmp:
        keys = build_history(Path(tmp) / "history.db", jobs, 2_000, now, rng)
        history = History(Path(tmp) / "history.db", read_only=True)
        started = time.perf_counter()
        rows = history.finished_since(now - 30 * DAY)
        predictor = Predictor(PredictionRules(Margin(15.0), 10), 30 * DAY, 60.0)
        predictor.load(rows, now)
        emit("history_load_s", time.perf_counter() - started, "s", jobs=jobs)
        history.close()

        running = [
            Running(
                f"run{i}",
                k.profile,
                k.profile,
                PROFILES[k.profile][0],
                PROFILES[k.profile][1],
                2 * G,
                0.5,
                G,
                now - 1,
            )
            for i, k in enumerate(rng.sample(keys, running_count))
        ]
        limits = Limits(policy=Policy.MEASURED, memory_max=512 * G, cpu_budget=512.0)
        slice_reading = SliceReading(now - 1, 200 * G)
        host = HostReading(now - 1, 1024 * G, 600 * G, 0.0, 200 * G)
        state = GuardState()
        admitted = 0
        started = time.perf_counter()
        for i in range(decisions):
            hinted = [keys[rng.randrange(len(keys))] for _ in range(3)]
            profile = hinted[0].profile
            cap, cpus = PROFILES[profile]
            hints = [
                JobHint(k.repository, k.workflow, k.job) for k in hinted if k.profile == profile
            ]
            prediction = predictor.predict_runner(profile, hints, cap, cpus, now)
            candidate = Candidate(f"new{i}", profile, profile, cap, cpus, 8 * G, 1000, prediction)
            outcome = decide(candidate, running, slice_reading, host, 500 * G, limits, state, now)
            state = outcome.state
            admitted += outcome.decision.__class__.__name__ == "Admit"
        elapsed = time.perf_counter() - started
        emit(
            "decisions_per_s",
            decisions / elapsed,
            "1/s",
            running=running_count,
            jobs=jobs,
            admitted=admitted,
        )

        tree = Path(tmp) / "cgroup"
        for i in range(running_count):
            d = tree / f"runner-{i}"
            d.mkdir(parents=True)
            (d / "memory.current").write_text(f"{rng.randrange(G, 6 * G)}\n")
            (d / "memory.stat").write_text(
                "".join(
                    f"{k} {rng.randrange(M, G)}\n"
                    for k in (
                        "anon",
                        "file",
                        "kernel",
                        "shmem",
                        "sock",
                        "active_file",
                        "inactive_file",
                        "slab_reclaimable",
                        "slab_unreclaimable",
                        "pgfault",
                        "pgmajfault",
                        "workingset_refault_file",
                    )
                )
            )
            for name in ("memory.events", "memory.events.local"):
                (d / name).write_text(
                    "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\nsock_throttled 0\n"
                )
            (d / "memory.max").write_text(f"{7 * G}\n")
            (d / "cpu.stat").write_text(
                "usage_usec 123456789\nuser_usec 100000000\nsystem_usec 23456789\n"
                "nr_periods 0\nnr_throttled 0\nthrottled_usec 0\n"
            )
        ticks = 5 if args.quick else 25
        started = time.process_time()
        for _ in range(ticks):
            for i in range(running_count):
                sample = readers.read_cgroup(tree / f"runner-{i}")
                assert sample is not None and sample.job_memory >= 0
        cpu = (time.process_time() - started) / (ticks * running_count)
        emit("sampler_cpu_ms_per_runner_per_tick", cpu * 1000, "ms", runners=running_count)
        emit("sampler_cpu_share_per_runner", cpu / 2.0 * 100, "%", interval_s=2.0)


if __name__ == "__main__":
    main()
