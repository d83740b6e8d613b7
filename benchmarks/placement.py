"""Placement decisions per second, and how their cost grows with the providers of a scale set.

A decision is what placing one runner asks of the engine: the ordered candidates with every
skip reason, one claim, and its outcome recorded (a creation, or a refusal that backs off and
may hold). Backoffs, holds and limits are active throughout. Prints JSON lines only.
"""

from __future__ import annotations

import argparse
import json
import random
import time

from rungar.config.model import Placement, ProviderConfig, ScaleSetConfig, ScaleSetProvider, Timing
from rungar.model.machine import Refusal, RefusalKind
from rungar.placement import Fleet, Skip

FULL = Refusal(RefusalKind.FULL, "not enough memory", "memory")
FAILED = Refusal(RefusalKind.FAILED, "connection reset")


def build(scale_sets: int, providers: int, seed: int = 1) -> Fleet:
    rng = random.Random(seed)
    provider_configs = [
        ProviderConfig(
            f"p{i}",
            "fake",
            weight=rng.choice([1.0, 2.0]),
            max_runners=rng.choice([0, 50, 200]),
            disabled=rng.random() < 0.02,
        )
        for i in range(providers)
    ]
    names = [p.name for p in provider_configs]
    set_configs = [
        ScaleSetConfig(
            f"s{j}",
            max_runners=10_000,
            providers=tuple(ScaleSetProvider(n) for n in names),
            priority=rng.choice([0, 0, 5, 10]),
            placement=rng.choice([Placement.SPREAD, Placement.PACK]),
        )
        for j in range(scale_sets)
    ]
    return Fleet(provider_configs, set_configs, Timing())


def decide(fleet: Fleet, names: list[str], rng: random.Random, now: float, n: int) -> float:
    """Run ``n`` decisions; return seconds spent in the engine."""
    start = time.perf_counter()
    for i in range(n):
        scale_set = names[i % len(names)]
        for provider in fleet.first_tryable(scale_set, now, 2):
            claim = fleet.claim(scale_set, provider, now)
            if isinstance(claim, Skip):
                continue
            roll = rng.random()
            if roll < 0.6:
                fleet.record_created(claim, now)
                if rng.random() < 0.5:
                    fleet.remove_runner(scale_set, provider, leaving=True)
                    fleet.machine_deleted(provider, now)
                break
            fleet.release(claim)
            fleet.record_refusal(scale_set, provider, FULL if roll < 0.85 else FAILED, now)
        else:
            fleet.hold_full_providers(scale_set, now)
        now += 0.05
    return time.perf_counter() - start


def measure(scale_sets: int, providers: int, decisions: int) -> float:
    fleet = build(scale_sets, providers)
    rng = random.Random(2)
    names = sorted(fleet.scale_sets)
    decide(fleet, names, rng, 1e9, min(decisions, 500))  # warm up: backoffs and holds exist
    seconds = decide(fleet, names, rng, 1e9 + 100, decisions)
    return decisions / seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    small_n, large_n = (5_000, 500) if args.quick else (50_000, 5_000)
    small = measure(50, 20, small_n)
    large = measure(20, 1_000, large_n)
    print(
        json.dumps(
            {
                "bench": "placement",
                "metric": "decisions_per_s",
                "value": round(small, 1),
                "unit": "1/s",
                "params": {"scale_sets": 50, "providers": 20},
            }
        )
    )
    print(
        json.dumps(
            {
                "bench": "placement",
                "metric": "decisions_per_s",
                "value": round(large, 1),
                "unit": "1/s",
                "params": {"scale_sets": 20, "providers": 1000},
            }
        )
    )
    cost_ratio = small / large
    print(
        json.dumps(
            {
                "bench": "placement",
                "metric": "cost_per_decision_ratio",
                "value": round(cost_ratio, 2),
                "unit": "x",
                "params": {"providers_ratio": 1000 / 20, "compare": "1000 vs 20 providers"},
            }
        )
    )
    print(
        json.dumps(
            {
                "bench": "placement",
                "metric": "cost_per_provider_ratio",
                "value": round(cost_ratio / (1000 / 20), 3),
                "unit": "x",
                "params": {"meaning": "<= 1 means no worse than linear in providers"},
            }
        )
    )


if __name__ == "__main__":
    main()
