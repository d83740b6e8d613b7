"""A job's predicted peak and average CPU from its history (docs/admission.md,
"Measured admission", "CPU admission"). Pure: runs in, a :class:`Prediction` out.

Memory, in the documented order:
- a run that met its cap or was killed for memory puts its job back on its cap until 3 of its
  runs in a row succeed clear of it (cancelled runs count), 7 days at most;
- with min_jobs successful runs: the p95 (nearest rank) of the peaks of its last 20 successful
  runs (or min_jobs when that is more), failed runs among them included, plus the margin,
  rounded up to 256M;
- fewer: the larger of the profile's p95 and the job's own largest peak, plus the margin; once 2
  succeeded, one copy at a time reserves its own largest instead, and a copy beside another
  takes the larger;
- no runs: the profile's largest peak plus the margin (a new workflow may be the heaviest);
- without min_jobs runs of the profile, or when every run of the job was cancelled: the cap;
- a run that went past what it reserved has its job reserve the larger of its recent runs'
  largest peak and that run's while it is among them, 7 days at most. Its recent runs are the
  ones the p95 reads: from the oldest of its last 20 successful runs (or min_jobs when that is
  more) on, failed ones among them; all of its runs while it has fewer successes. With
  ``[host] over_run = "window"`` it reserves the larger of the job's largest peak of the whole
  window and that run's, for 7 days, whatever newer runs came.
A prediction never exceeds the cap: the container cannot hold more.

CPU: the same tiers over average CPU (CPU time ÷ run time), without a margin, in 0.1 CPU steps.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from runnerd.admission.model import Margin, OverRun, Prediction, Run

GRANULE = 256 * 1024**2
CPU_GRANULE = 0.1
RECENT_RUNS = 20
OWN_RUNS = 2
CLEAN_RUNS = 3


def round_up(value: int, granule: int = GRANULE) -> int:
    return -(-value // granule) * granule


@functools.lru_cache(maxsize=4096)  # average CPUs repeat: a replay rounds the same few often
def round_cpu(value: float) -> float:
    return round(math.ceil(round(value / CPU_GRANULE, 6)) * CPU_GRANULE, 1)


def p95(values: Sequence[float]) -> float:
    """Nearest-rank p95: with 20 values the second largest; fewer than 20, the largest."""
    ordered = sorted(values)
    return ordered[math.ceil(0.95 * len(ordered)) - 1]


@dataclass(frozen=True, slots=True)
class ProfileStats:
    """A profile's runs in the window: how many, and their p95 and largest peaks and CPUs."""

    runs: int = 0
    p95_peak: int = 0
    max_peak: int = 0
    cpu_runs: int = 0
    p95_cpu: float = 0.0
    max_cpu: float = 0.0


def profile_stats(runs: Sequence[Run]) -> ProfileStats:
    counted = [r for r in runs if not r.cancelled or r.met_cap]
    if not counted:
        return ProfileStats()
    peaks = [r.counted_peak for r in counted]
    cpus = [r.avg_cpu for r in counted if r.succeeded and r.avg_cpu is not None]
    return ProfileStats(
        runs=len(counted),
        p95_peak=int(p95(peaks)),
        max_peak=max(peaks),
        cpu_runs=len(cpus),
        p95_cpu=p95(cpus) if cpus else 0.0,
        max_cpu=max(cpus) if cpus else 0.0,
    )


@dataclass(frozen=True, slots=True)
class PredictionRules:
    margin: Margin = field(default_factory=Margin)
    min_jobs: int = 10
    hold_for: float = 7 * 86400.0
    over_run: OverRun = OverRun.RECENT


def on_cap_hold(runs: Sequence[Run], now: float, hold_for: float) -> bool:
    """True while a run that met its cap (or was killed for memory) is not yet followed by 3
    clean runs in a row, for at most ``hold_for`` after it. ``runs`` oldest first."""
    last_hit = None
    for i, run in enumerate(runs):
        if run.met_cap or run.killed_for_memory:
            last_hit = i
    if last_hit is None or now - runs[last_hit].finished_at > hold_for:
        return False
    streak = 0
    for run in runs[last_hit + 1 :]:
        streak = streak + 1 if run.succeeded or run.cancelled else 0
        if streak >= CLEAN_RUNS:
            return False
    return True


@dataclass(frozen=True, slots=True)
class JobFacts:
    """What the tiers read of a job's runs in the window. :func:`job_facts` scans the runs for
    them; :class:`runnerd.admission.job_runs.JobRuns` keeps them up to date as runs are added,
    so the daemon and ``runnerd simulate`` predict in microseconds from the same tiers."""

    runs: int = 0
    all_cancelled: bool = False
    on_hold: bool = False
    counted: int = 0  # runs not cancelled, or that met their cap
    successes: int = 0
    recent_p95: int = 0  # with min_jobs successes: the p95 of the recent counted peaks
    recent_runs: int = 0  # how many counted runs that p95 is over
    own: int = 0  # the largest counted peak
    # The largest peak of a run past its reservation within hold_for (and, by the default
    # rule, among its recent runs), and the largest counted peak its reservation is held to
    # beside it: of the recent runs by default, of the whole window under over_run = "window".
    over_peak: int | None = None
    over_own: int = 0
    cpu_runs: int = 0  # successful runs with an average CPU
    cpu_p95: float = 0.0  # their p95, with min_jobs of them
    cpu_max: float = 0.0


def needed_successes(rules: PredictionRules) -> int:
    """Successful runs the p95 tier starts at."""
    return rules.min_jobs


def recent_successes(rules: PredictionRules) -> int:
    """How many of the newest successful runs the p95 reads: 20, or min_jobs when more."""
    return max(RECENT_RUNS, rules.min_jobs)


def job_facts(runs: Sequence[Run], rules: PredictionRules, now: float) -> JobFacts:
    """The facts by a scan of ``runs`` (the job's runs in the window, oldest first)."""
    counted = [r for r in runs if not r.cancelled or r.met_cap]
    successes = [r for r in counted if r.succeeded]
    recent_p95 = recent_runs = 0
    if len(successes) >= needed_successes(rules):
        oldest = successes[-min(len(successes), recent_successes(rules))].finished_at
        window = [r.counted_peak for r in counted if r.finished_at >= oldest]
        recent_p95, recent_runs = int(p95(window)), len(window)
    # A run past its reservation counts cancelled or not: a cancel ends it after it went past.
    # By default only while it is among the job's recent runs, held beside their largest peak.
    held = runs
    if rules.over_run is OverRun.RECENT and len(successes) >= recent_successes(rules):
        since = successes[-recent_successes(rules)].finished_at
        held = [r for r in runs if r.finished_at >= since]
    over = [
        r.peak
        for r in held
        if r.reserved is not None and r.peak > r.reserved and now - r.finished_at <= rules.hold_for
    ]
    averages = [r.avg_cpu for r in runs if r.succeeded and r.avg_cpu is not None]
    return JobFacts(
        runs=len(runs),
        all_cancelled=bool(runs) and all(r.cancelled for r in runs),
        on_hold=on_cap_hold(runs, now, rules.hold_for),
        counted=len(counted),
        successes=len(successes),
        recent_p95=recent_p95,
        recent_runs=recent_runs,
        own=max((r.counted_peak for r in counted), default=0),
        over_peak=max(over) if over else None,
        over_own=max((r.counted_peak for r in held if not r.cancelled or r.met_cap), default=0),
        cpu_runs=len(averages),
        cpu_p95=p95(averages) if len(averages) >= rules.min_jobs and averages else 0.0,
        cpu_max=max(averages, default=0.0),
    )


def predict_memory(
    runs: Sequence[Run],
    profile: ProfileStats,
    cap: int,
    rules: PredictionRules,
    now: float,
    beside: bool = False,
) -> tuple[int, str]:
    """(bytes, basis) for one job; ``runs`` are its runs in the window, oldest first."""
    return memory_from_facts(job_facts(runs, rules, now), profile, cap, rules, beside)


def memory_from_facts(
    job: JobFacts, profile: ProfileStats, cap: int, rules: PredictionRules, beside: bool = False
) -> tuple[int, str]:
    """The memory tiers, in the documented order (see the module docstring)."""
    if profile.runs < rules.min_jobs:
        return cap, f"its cap, as its profile has fewer than {rules.min_jobs} runs"
    if job.all_cancelled:
        return cap, "its cap, as every run of its job was cancelled"
    if job.on_hold:
        return cap, "its cap, as a run of its job met its cap or was killed for memory"
    margin = rules.margin
    if job.successes >= needed_successes(rules):
        memory = round_up(margin.add(job.recent_p95))
        basis = f"the p95 peak of its job's last {job.recent_runs} runs + the margin"
    elif not job.counted:
        memory = round_up(margin.add(profile.max_peak))
        basis = "its profile's largest peak, as its job has no runs yet, + the margin"
    elif job.successes >= OWN_RUNS and not beside:
        memory = round_up(margin.add(job.own))
        basis = f"the largest peak of its job's {job.counted} runs + the margin"
    else:
        memory = round_up(margin.add(max(job.own, profile.p95_peak)))
        why = "as another copy runs beside it" if beside else f"of {job.counted} runs"
        basis = f"the larger of its profile's p95 and its job's largest peak {why} + the margin"
    if job.over_peak is not None:
        largest = round_up(max(job.over_own, job.over_peak))
        if largest > memory:
            memory = largest
            basis = "its job's largest recent peak, as a run went past what it reserved"
    if memory >= cap:
        return cap, basis + ", held to its cap"
    return memory, basis


def predict_cpu(
    runs: Sequence[Run],
    profile: ProfileStats,
    cpus: float,
    rules: PredictionRules,
    beside: bool = False,
) -> tuple[float, str]:
    """(CPUs, basis) from average CPU; there is no margin: the overcommit factor is the margin."""
    averages = [r.avg_cpu for r in runs if r.succeeded and r.avg_cpu is not None]
    facts = JobFacts(
        cpu_runs=len(averages),
        cpu_p95=p95(averages) if len(averages) >= rules.min_jobs and averages else 0.0,
        cpu_max=max(averages, default=0.0),
    )
    return cpu_from_facts(facts, profile, cpus, rules, beside)


def cpu_from_facts(
    job: JobFacts, profile: ProfileStats, cpus: float, rules: PredictionRules, beside: bool = False
) -> tuple[float, str]:
    if profile.cpu_runs < rules.min_jobs:
        return cpus, "its profile's cpus"
    if job.cpu_runs >= rules.min_jobs:
        value, basis = job.cpu_p95, f"the p95 average CPU of its job's {job.cpu_runs} runs"
    elif not job.cpu_runs:
        value, basis = profile.max_cpu, "its profile's largest average CPU"
    elif job.cpu_runs >= OWN_RUNS and not beside:
        value, basis = job.cpu_max, "its job's largest average CPU"
    else:
        value = max(job.cpu_max, profile.p95_cpu)
        basis = "the larger of its job's largest and its profile's p95 average CPU"
    return min(cpus, round_cpu(value)), basis


def predict(
    runs: Sequence[Run],
    profile: ProfileStats,
    cap: int,
    cpus: float,
    rules: PredictionRules,
    now: float,
    beside: bool = False,
) -> Prediction:
    return predict_from_facts(job_facts(runs, rules, now), profile, cap, cpus, rules, beside)


def predict_from_facts(
    job: JobFacts,
    profile: ProfileStats,
    cap: int,
    cpus: float,
    rules: PredictionRules,
    beside: bool = False,
) -> Prediction:
    memory, basis = memory_from_facts(job, profile, cap, rules, beside)
    cpu, cpu_basis = cpu_from_facts(job, profile, cpus, rules, beside)
    return Prediction(memory, cpu, basis, cpu_basis)


def largest(predictions: Sequence[Prediction], queued: int) -> Prediction:
    """A runner before its job is known reserves the largest of its scale set's queued jobs."""
    top = max(predictions, key=lambda p: p.memory)
    top_cpu = max(p.cpu for p in predictions)
    if queued <= 1:
        return top
    return Prediction(
        top.memory,
        top_cpu,
        f"the largest prediction of its scale set's {queued} queued jobs: {top.basis}",
        top.cpu_basis,
    )
