"""The table and the JSON of ``rungar simulate``: one row per scenario and scale set, and one
per scenario and provider.

Waits are each job's time from queued to started, as nearest-rank percentiles; holds are the
priority holds a scale set placed (not renewals) and how long they stood; runner-hours count
each machine from create to delete, and cost is runner-hours times the model's price.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rungar.simulate.world import WorldResult


def nearest_rank(values: Sequence[float], share: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def wait_text(seconds: float) -> str:
    """``0s``, ``57s``, ``4m19s``, ``1h02m``, as ``runnerd simulate`` prints waits."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


@dataclass(frozen=True, slots=True)
class Row:
    scenario: str
    result: WorldResult
    priced: frozenset[str]  # providers with a cost: the clouds
    warm_pool: str = ""  # "with" or "without": a warm-pool what-if, compared with the baseline


def _effect(with_pool: WorldResult, without: WorldResult, names: Sequence[str]) -> dict[str, float]:
    """p95 wait saved and runner-hours spent by the warm pool, for the jobs of ``names``."""
    waits_with = [w for n in names for w in with_pool.waits.get(n, [])]
    waits_without = [w for n in names for w in without.waits.get(n, [])]
    hours_with = sum(with_pool.runner_seconds.get(n, 0.0) for n in names) / 3600
    hours_without = sum(without.runner_seconds.get(n, 0.0) for n in names) / 3600
    p95_with, p95_without = nearest_rank(waits_with, 0.95), nearest_rank(waits_without, 0.95)
    return {
        "p95_wait_with": round(p95_with, 1),
        "p95_wait_without": round(p95_without, 1),
        "p95_wait_saved_s": round(p95_without - p95_with, 1),
        "runner_hours_with": round(hours_with, 2),
        "runner_hours_without": round(hours_without, 2),
        "runner_hours_spent": round(hours_with - hours_without, 2),
    }


def warm_pool_effects(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """Each warm-pool what-if against the baseline: the row with a warm pool and the row
    without, per scale set and for every job together."""
    if not rows:
        return []
    baseline = rows[0]
    out = []
    for row in rows[1:]:
        if not row.warm_pool:
            continue
        with_pool, without = (row, baseline) if row.warm_pool == "with" else (baseline, row)
        names = list(baseline.result.waits)
        out.append(
            {
                "with": with_pool.scenario,
                "without": without.scenario,
                "scale_sets": {n: _effect(with_pool.result, without.result, [n]) for n in names},
                "all": _effect(with_pool.result, without.result, names),
            }
        )
    return out


def warm_pool_lines(effects: Sequence[dict[str, Any]]) -> list[str]:
    """``ci  p95 wait 1m05s -> 3s (1m02s saved) for 12.4 more runner-hours``."""
    lines: list[str] = []
    for effect in effects:
        lines += ["", f"Warm pool ({effect['with']} against {effect['without']}):"]
        entries = [*effect["scale_sets"].items(), ("all jobs", effect["all"])]
        width = max(len(name) for name, _ in entries) + 2
        for name, e in entries:
            saved = e["p95_wait_saved_s"]
            spent = e["runner_hours_spent"]
            lines.append(
                f"  {name:<{width}}p95 wait {wait_text(e['p95_wait_without'])} -> "
                f"{wait_text(e['p95_wait_with'])} ("
                + (f"{wait_text(saved)} saved" if saved >= 0 else f"{wait_text(-saved)} more")
                + f") for {abs(spent):.1f} {'more' if spent >= 0 else 'fewer'} runner-hours"
            )
    return lines


def as_json(rows: Sequence[Row], jobs: int) -> dict[str, Any]:
    out: list[dict[str, Any]] = []
    for row in rows:
        result = row.result
        scale_sets = {}
        for name, waits in result.waits.items():
            hold = result.holds[name]
            scale_sets[name] = {
                "jobs": len(waits) + result.never_started[name],
                "never_started": result.never_started[name],
                "wait_p50": round(nearest_rank(waits, 0.50), 1),
                "wait_p95": round(nearest_rank(waits, 0.95), 1),
                "wait_max": round(max(waits, default=0.0), 1),
                "holds": hold.taken,
                "held_s": round(hold.seconds, 1),
                "runner_hours": round(result.runner_seconds.get(name, 0.0) / 3600, 2),
            }
        providers = {}
        for name, backend in result.backends.items():
            usage = backend.usage
            hours = usage.machine_seconds / 3600
            providers[name] = {
                "created": usage.created,
                "refusals": dict(sorted(usage.refusals.items())),
                "kills": usage.kills,
                "runner_hours": round(hours, 2),
                "cost": round(hours * backend.model.price_per_hour, 2)
                if name in row.priced
                else None,
            }
        out.append({"scenario": row.scenario, "scale_sets": scale_sets, "providers": providers})
    found: dict[str, Any] = {"jobs": jobs, "scenarios": out}
    effects = warm_pool_effects(rows)
    if effects:
        found["warm_pool"] = effects
    return found


REFUSAL_COLUMNS = (("full", "FULL"), ("failed", "FAILED"), ("invalid", "INVALID"),
                   ("unanswered", "NO ANSWER"))  # fmt: skip


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def render(rows: Sequence[Row], jobs: int, days: float, footnote: str = "") -> str:
    if not rows:
        return ""
    first = rows[0].result
    width = max(12, *(len(r.scenario) for r in rows)) + 2
    sets = max(9, *(len(n) for n in first.waits)) + 2
    provs = (
        max(
            8, *(len(n) for n in first.backends), *(len(n) for r in rows for n in r.result.backends)
        )
        + 2
    )
    lines = [
        f"{jobs} jobs over {days:.3g} days replayed through "
        f"{_count(len(first.backends), 'provider')} and {_count(len(first.waits), 'scale set')} "
        "on a virtual clock.",
        "",
        f"{'SCENARIO':<{width}}{'SCALE SET':<{sets}}{'JOBS':>7}{'WAIT P50':>10}"
        f"{'WAIT P95':>10}{'WAIT MAX':>10}{'HOLDS':>7}{'HELD':>9}",
    ]
    for row in rows:
        label = row.scenario
        for name, waits in row.result.waits.items():
            hold = row.result.holds[name]
            never = row.result.never_started[name]
            count = f"{len(waits) + never}" + ("!" if never else "")
            lines.append(
                f"{label:<{width}}{name:<{sets}}{count:>7}"
                f"{wait_text(nearest_rank(waits, 0.5)):>10}"
                f"{wait_text(nearest_rank(waits, 0.95)):>10}"
                f"{wait_text(max(waits, default=0.0)):>10}"
                f"{hold.taken:>7}{wait_text(hold.seconds) if hold.taken else '-':>9}"
            )
            label = ""
    head = f"{'SCENARIO':<{width}}{'PROVIDER':<{provs}}{'CREATED':>8}"
    head += "".join(f"{title:>{max(7, len(title) + 2)}}" for _, title in REFUSAL_COLUMNS)
    head += f"{'KILLS':>7}{'RUNNER-H':>10}{'COST':>10}"
    lines += ["", head]
    for row in rows:
        label = row.scenario
        for name, backend in row.result.backends.items():
            usage = backend.usage
            hours = usage.machine_seconds / 3600
            line = f"{label:<{width}}{name:<{provs}}{usage.created:>8}"
            for kind, title in REFUSAL_COLUMNS:
                line += f"{usage.refusals.get(kind, 0):>{max(7, len(title) + 2)}}"
            cost = f"{hours * backend.model.price_per_hour:.2f}" if name in row.priced else "-"
            line += f"{usage.kills:>7}{hours:>10.1f}{cost:>10}"
            lines.append(line)
            label = ""
    lines += warm_pool_lines(warm_pool_effects(rows))
    lines.append("")
    lines += textwrap.wrap(
        "WAIT: queued to started. JOBS marked ! include jobs never started (every provider "
        "refused them to the end). HOLDS: priority holds the scale set placed, HELD: how long "
        "they stood. FULL, FAILED, INVALID: refusals by kind; NO ANSWER: creates a provider did "
        "not answer. KILLS: jobs the kernel killed when the running jobs outgrew a runnerd host's "
        "MemoryMax. RUNNER-H: machine hours, create to delete; COST: that times the model's "
        "price per hour."
        + (
            " Warm pool: the p95 wait of the jobs without the warm pool and with it, and the "
            "runner-hours (machine hours of the scale set's runners) it cost."
            if any(r.warm_pool for r in rows)
            else ""
        ),
        width=100,
    )
    if footnote:
        lines.append(footnote)
    return "\n".join(lines)
