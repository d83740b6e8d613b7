"""The demo's hosts start with a short history of the demo's own jobs, as hosts that ran them
before; the summary counts only the jobs the demo ran, and how many came before."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from runnerd.config import Profile
from runnerd.history import History, JobEnd, JobStart
from runnerd.history_generate import write_history

from rungar.demo.learning import read_learning
from rungar.demo.past import DAY, INTERPRETER, past_jobs
from rungar.demo.scenario import Burst
from rungar.testing.github_emulator.model import JobSpec

MIB = 1024 * 1024
PROFILES = {
    "demo-small": Profile("small", cpus=1, memory=160 * MIB, slots=4),
    "demo-large": Profile("large", cpus=2, memory=448 * MIB, slots=1),
}


def specs() -> list[JobSpec]:
    rng = random.Random(6)
    burst = Burst()
    return [*burst.small_jobs(rng), *burst.large_jobs(rng)]


def test_each_host_gets_its_share_of_an_earlier_burst_a_day_before_in_real_seconds() -> None:
    jobs = specs()
    now = 2_000_000_000.0
    shares = [past_jobs(jobs, PROFILES, host, 3, 20.0, now, seed=6) for host in range(3)]
    assert sorted(len(s) for s in shares) == [10, 11, 11]
    assert sum(len(s) for s in shares) == len(jobs)
    first = shares[0][0]
    spec = jobs[0]
    assert first.key.repository == spec.repository and first.key.job == spec.name
    assert first.key.profile == "small" and first.start.scale_set == "demo-small"
    ran = first.end.finished_at - first.start.started_at
    assert ran == pytest.approx(spec.duration / 20.0, abs=1e-3)
    assert first.end.peak_memory == min(160 * MIB, spec.memory_bytes + INTERPRETER)
    assert all(now - DAY <= j.start.started_at < now - DAY / 2 for s in shares for j in s)
    assert past_jobs(jobs, PROFILES, 1, 3, 20.0, now, seed=6) == shares[1], "pure"


def test_a_hosts_learning_counts_the_demos_jobs_and_those_before_apart(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    now = time.time()
    before = past_jobs(specs(), PROFILES, 0, 3, 20.0, now, seed=6)
    assert write_history(path, before) == len(before)
    history = History(path)
    try:  # one job of the demo's own, started after it began
        row = history.start(
            JobStart("demo-small-1", "demo-small", "small", 160 * MIB, 1.0, "measured",
                     96 * MIB, 1.0, "the larger of its profile's p95 and its job's", None,
                     None, now + 1)
        )  # fmt: skip
        history.finish(row, JobEnd("succeeded", 80 * MIB, 0.05, False, False, 0, now + 5))
    finally:
        history.close()
    learning = read_learning("host1", path, since=now)
    assert learning.jobs == 1 and learning.predicted == 1
    assert learning.before == len(before)
    assert learning.text().endswith(f"(it had run {len(before)} before the demo)")
    assert read_learning("host1", path).jobs == len(before) + 1, "since 0: every job"
