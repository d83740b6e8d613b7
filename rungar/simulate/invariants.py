"""Seeded whole-fleet replays that check the fleet's promises after every event.

Each seed builds a random fleet (runnerd hosts and clouds, weights, limits, quotas, outages,
scripted refusals; scale sets with priorities, placements and limits) and a random burst of
jobs, replays it through :class:`rungar.simulate.world.World`, and checks after every event:

1. no scale set has more runners than its ``max_runners``;
2. no provider holds more machines than its ``max_runners`` (nor a cloud more than its quota);
3. no job starts before it was queued, and in the end every job started once or is counted
   as never started;
4. the placement fleet counts exactly the runners the world has.

A failure raises :class:`FleetInvariantBroken`, whose message names the seed and the call that
replays it: ``rungar.simulate.invariants.check_seed(SEED)``.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

from rungar.config.loader import parse_scale_sets
from rungar.config.model import ScaleSetsFile
from rungar.simulate.history import SimJob
from rungar.simulate.models import Models, ProviderModel, Window
from rungar.simulate.scenario import Scenario, backends
from rungar.simulate.synthetic import START, host_toml
from rungar.simulate.world import World, WorldResult


class FleetInvariantBroken(AssertionError):
    def __init__(self, seed: int, at: float, message: str) -> None:
        self.seed = seed
        super().__init__(
            f"seed {seed}, {at - START:.0f} s in: {message} "
            f"(replay: rungar.simulate.invariants.check_seed({seed}))"
        )


def random_fleet(seed: int) -> tuple[ScaleSetsFile, Models, list[SimJob]]:
    rng = random.Random(seed)
    providers, models = [], {}
    for i in range(rng.randint(1, 4)):
        name = f"p{i}"
        limit = rng.choice([0, 0, 2, 5])
        weight = rng.choice([1, 1, 2])
        outages = (
            (Window(rng.uniform(0, 3000), rng.uniform(3000, 6000)),) if rng.random() < 0.3 else ()
        )
        if rng.random() < 0.5:
            slots = rng.randint(1, 6)
            shapes = [("small", 2, "2G", slots), ("large", 8, "8G", max(1, slots // 2))]
            toml = host_toml(f"{slots * 4 + 1}G", rng.choice(["caps", "measured"]), shapes)
            models[name] = ProviderModel(name, toml, f"{name}.toml", boot=5.0, outages=outages)
            kind = "runnerd"
        else:
            refusals: tuple[Window, ...] = ()
            if rng.random() < 0.3:
                refusals = (
                    Window(rng.uniform(0, 2000), rng.uniform(2000, 5000), message="no stock"),
                )
            quota, boot = rng.choice([0, 1, 3]), rng.choice([20.0, 60.0])
            models[name] = ProviderModel(
                name, quota=quota, boot=boot, refusals=refusals, outages=outages
            )
            kind = "fake"
        address = ", address: 'unix:///run/p.sock'" if kind == "runnerd" else ""
        providers.append(
            f"  - {{ name: {name}, type: {kind}, weight: {weight}"
            f"{f', max_runners: {limit}' if limit else ''}{address} }}\n"
        )
    names = [f"p{i}" for i in range(len(providers))]
    sets = []
    for label in ("small", "large"):
        chosen = rng.sample(names, rng.randint(1, len(names)))
        entries = "".join(
            f"      - {{ name: {n}, runner: {{ profile: {label} }} }}\n" for n in chosen
        )
        sets.append(
            f"  - name: {label}\n    max_runners: {rng.randint(1, 10)}\n"
            f"    priority: {rng.choice([0, 0, 10])}\n"
            f"    placement: {rng.choice(['spread', 'pack'])}\n"
            f"    providers:\n{entries}"
        )
    text = "version: 1\nproviders:\n" + "".join(providers) + "scale_sets:\n" + "".join(sets)
    config = parse_scale_sets(text, f"seed-{seed}.yaml")
    jobs = []
    at = START
    for _ in range(rng.randint(5, 80)):
        at += rng.expovariate(1 / 60)
        label = rng.choice(["small", "small", "large"])
        peak = int(rng.uniform(0.2, 1.0) * (2 if label == "small" else 8) * 2**30)
        cap = (2 if label == "small" else 8) * 2**30
        jobs.append(SimJob(label, "acme/app", "ci", label, at, rng.uniform(30, 1800), peak, cap,
                           None, "success", label))  # fmt: skip
    return config, Models(models), jobs


@dataclass
class _Checker:
    seed: int
    config: ScaleSetsFile
    quotas: dict[str, int]

    def __call__(self, world: World) -> None:
        def fail(message: str) -> FleetInvariantBroken:
            return FleetInvariantBroken(self.seed, world.now, message)

        for s in self.config.scale_sets:
            count = len(world.of_set[s.name])
            if count > s.max_runners:
                raise fail(f"{s.name} has {count} runners > its max_runners {s.max_runners}")
            if world.fleet.runners_of(s.name) != count:
                raise fail(f"the fleet counts {world.fleet.runners_of(s.name)} of {s.name}, "
                           f"the world has {count}")  # fmt: skip
        for p in self.config.providers:
            machines = len(world.backends[p.name].machines)
            if p.max_runners and machines > p.max_runners:
                raise fail(f"{p.name} holds {machines} machines > its max_runners {p.max_runners}")
            quota = self.quotas.get(p.name, 0)
            if quota and machines > quota:
                raise fail(f"{p.name} holds {machines} machines > its quota {quota}")
        for scale_set, waits in world.waits.items():
            if waits and min(waits) < 0:
                raise fail(f"a job of {scale_set} started before it was queued")


def check_seed(seed: int) -> WorldResult:
    """Replay one seed with every invariant checked; raises :class:`FleetInvariantBroken`."""
    config, models, jobs = random_fleet(seed)
    made = backends(Scenario(), config, models, jobs[0].queued_at)
    quotas = {n: m.quota for n, m in models.providers.items()}
    checker = _Checker(seed, config, quotas)
    world = World(config, made, jobs, check=checker)
    result = asyncio.run(world.run())
    started = sum(len(w) for w in result.waits.values())
    never = sum(result.never_started.values())
    if started + never != len(jobs):
        raise FleetInvariantBroken(seed, world.now, f"{started} started and {never} never "
                                   f"started of {len(jobs)} jobs")  # fmt: skip
    return result
