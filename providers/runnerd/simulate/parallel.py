"""The table's rows replayed side by side, one worker process per CPU this process may use.

100,000 jobs go through every policy in seconds. A replay is one thread of pure Python and
the rows are independent, so on a host with two or more CPUs they run at once in forked worker
processes, the costliest first: CPU rows, then measured, then caps (greedy longest-first keeps the
workers busy to the end). Forked workers inherit the history instead of receiving a pickled copy,
which for 100,000 runs would cost more than a second each way. Forking a process that runs other
threads can deadlock the child on a lock one of them held, so with other threads running, with one
CPU, or without ``fork`` the rows are replayed here, one after the other; the results are the
same either way.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace

from runnerd.admission import Limits, Policy, PredictionRules
from runnerd.simulate.replay import replay
from runnerd.simulate.rows import ProfileShape, ReplayResult, Scenario
from runnerd.sizing.runs import SizingRun


@dataclass(frozen=True, slots=True)
class _Inputs:
    profiles: Mapping[str, ProfileShape]
    jobs: Sequence[SizingRun]
    limits: Limits
    rules: PredictionRules
    slice_cpus: float | None
    warm: Sequence[SizingRun]


# What forked workers inherit: set only while a pool runs (one at a time, under the lock).
_INPUTS: _Inputs | None = None
_POOL_LOCK = threading.Lock()


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity, where the platform tells it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def replay_all(
    scenarios: Sequence[Scenario],
    profiles: Mapping[str, ProfileShape],
    jobs: Sequence[SizingRun],
    limits: Limits,
    rules: PredictionRules,
    slice_cpus: float | None = None,
    warm: Sequence[SizingRun] = (),
    workers: int | None = None,
) -> tuple[ReplayResult, ...]:
    """Every scenario replayed (see :func:`runnerd.simulate.replay.replay`), in ``scenarios``
    order, in up to ``workers`` processes (default: :func:`usable_cpus`)."""
    inputs = _Inputs(profiles, jobs, limits, rules, slice_cpus, warm)
    count = min(len(scenarios), workers or usable_cpus())
    if count < 2 or not _can_fork():
        return tuple(_timed(inputs, s) for s in scenarios)
    global _INPUTS
    with _POOL_LOCK:
        _INPUTS = inputs
        try:
            context = multiprocessing.get_context("fork")
            with ProcessPoolExecutor(count, mp_context=context) as pool:
                costliest_first = sorted(scenarios, key=_expected_cost, reverse=True)
                futures = {id(s): pool.submit(_replay_inherited, s) for s in costliest_first}
                return tuple(futures[id(s)].result() for s in scenarios)
        finally:
            _INPUTS = None


def _can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1


def _expected_cost(scenario: Scenario) -> int:
    """Rows by what a replay costs: predictions and CPU waiters are the expensive parts."""
    if scenario.cpu_factor is not None:
        return 2
    return 1 if scenario.policy is Policy.MEASURED else 0


def _replay_inherited(scenario: Scenario) -> ReplayResult:
    inputs = _INPUTS
    if inputs is None:  # only a forked worker of replay_all runs this
        raise RuntimeError("no replay inputs: not a worker of replay_all")
    return _timed(inputs, scenario)


def _timed(inputs: _Inputs, scenario: Scenario) -> ReplayResult:
    started = time.perf_counter()
    result = replay(
        scenario,
        inputs.profiles,
        inputs.jobs,
        inputs.limits,
        inputs.rules,
        inputs.slice_cpus,
        inputs.warm,
    )
    return replace(result, seconds=time.perf_counter() - started)
