"""``runnerd simulate``: read the config and the history read-only, replay, print the table.

docs/admission.md, "Try it first: runnerd simulate": it changes nothing and works without the
daemon. Without ``--memory-max`` the slice's is read (the config's ``memory_max``, else the slice's
cgroup); without ``--cpus``, the slice's CPUs; ``--since 7d`` (or 12h, 2w) sets the window, 30 days
by default. Predictions may read the 30 days before the window, as the daemon's would have. A
window of more than ``--max-jobs`` jobs is replayed over its latest whole weeks
(:mod:`runnerd.simulate.sample`); ``--all`` replays all of it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from runnerd.admission import Limits, PredictionRules
from runnerd.config import RunnerdConfig, prediction_rules
from runnerd.simulate.parallel import replay_all
from runnerd.simulate.replay import replayable
from runnerd.simulate.rows import ProfileShape, ReplayResult
from runnerd.simulate.sample import MAX_JOBS, Span, latest_weeks
from runnerd.simulate.table import candidate_slots, render, scenarios
from runnerd.sizing.runs import DAY, open_read_only, read_runs


@dataclass(frozen=True, slots=True)
class SimulateRequest:
    memory_max: int
    slice_cpus: float | None
    since: float = 30 * DAY
    slots: Mapping[str, int] | None = None
    cpu_factors: Sequence[float] = ()
    workers: int | None = None  # processes replaying rows at once; None: the usable CPUs
    max_jobs: int | None = MAX_JOBS  # more in the window: its latest whole weeks; None: all
    on_stale: Callable[[str], None] | None = None  # told when the history lacks its -wal


@dataclass(frozen=True, slots=True)
class SimulateReport:
    jobs: int
    results: tuple[ReplayResult, ...]
    text: str
    span: Span


def limits_of(config: RunnerdConfig, memory_max: int) -> Limits:
    host = config.host
    return Limits(
        policy=host.admission,
        memory_max=memory_max,
        mirror=host.mirror_memory,
        high_water=host.high_water,
        fresh_for=host.fresh_for,
        cpu_starvation=host.cpu_starvation,
    )


def rules_of(config: RunnerdConfig) -> PredictionRules:
    return prediction_rules(config)


def simulate(
    config: RunnerdConfig, history_path: str, request: SimulateRequest, now: float
) -> SimulateReport:
    profiles = {n: ProfileShape(p.memory, p.cpus) for n, p in config.profiles.items()}
    unknown = set(request.slots or {}) - set(profiles)
    if unknown:
        raise ValueError(f"--slots names no profile of the config: {', '.join(sorted(unknown))}")
    start = now - request.since
    with open_read_only(history_path, request.on_stale) as db:
        runs = read_runs(db, start - config.host.history_window, now)
    window = replayable([r for r in runs if r.arrived_at >= start], profiles)
    span = latest_weeks(window, start, now, request.max_jobs)
    jobs = window[len(window) - span.jobs :]
    warm = [r for r in runs if r.finished_at < span.start]
    configured = {n: p.slots for n, p in config.profiles.items()}
    mirror = config.host.mirror_memory
    candidate = candidate_slots(
        profiles, configured, request.memory_max, mirror, request.slots or {}
    )
    limits = limits_of(config, request.memory_max)
    rules = rules_of(config)
    rows = scenarios(
        profiles, configured, candidate, request.memory_max, mirror, request.cpu_factors
    )
    results = replay_all(
        rows, profiles, jobs, limits, rules, request.slice_cpus, warm, request.workers
    )
    text = render(results, len(jobs), request.memory_max, request.slice_cpus, span.note())
    return SimulateReport(len(jobs), results, text, span)
