"""What a replay takes and answers: a profile's shape, a row of the table, a row's result.

These cross between processes (:mod:`runnerd.simulate.parallel` sends rows to its workers and
their results back), so they are plain dataclasses that pickle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from runnerd.admission import Policy


@dataclass(frozen=True, slots=True)
class ProfileShape:
    """A profile as the replay needs it: each runner's cap and CPUs."""

    memory: int
    cpus: float


@dataclass(frozen=True, slots=True)
class Scenario:
    """One row of the table: a policy and slots, with a CPU budget factor or none."""

    name: str
    policy: Policy
    slots: Mapping[str, int]
    cpu_factor: float | None = None


@dataclass(frozen=True, slots=True)
class ReplayResult:
    scenario: Scenario
    jobs: int
    never_started: int
    wait_p50: float
    wait_p95: float
    wait_max: float
    wait_mean: float
    at_once: int
    peaks: int  # every running job's peak plus the mirror at the busiest moment
    under: int  # jobs that peaked above what admission reserved for them
    held: int  # times the high-water mark held back a job the predictions had room for
    cpu: float  # the most the running jobs' average CPUs added up to at once
    cpu_held: int | None  # times the CPU budget held back a job memory and slots had room for
    makespan: float
    seconds: float = field(default=0.0, compare=False)  # what the replay took, for benchmarks
