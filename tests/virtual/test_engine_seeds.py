"""Seeded fleets with faults, through the real engine on the virtual clock.

Each seed builds a random fleet (one to three providers of random room and limits; two or three
scale sets with priorities, placements and limits) and an hour of random bursts, then faults at
random moments: refusals (full or failing), creates that get no answer, deletes that fail,
listings that fail for a while, and a restart of the daemon on the same state file. The harness
checks the fleet's promises after every event; at the end every job has run exactly once, and
no machine or registration is left behind.

The default run takes two seeds, and runs one twice to show that a seed replays the same run
(runner names aside); ``RUNGAR_VIRTUAL_SEEDS=N`` takes N (``make test-long``), and
``RUNGAR_VIRTUAL_SEED=S`` replays one.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from rungar.config.loader import parse_scale_sets
from rungar.config.model import ScaleSetsFile
from rungar.model.machine import RefusalKind
from tests.virtual.harness import Host, VirtualFleet, seeds

SEEDS = int(os.environ.get("RUNGAR_VIRTUAL_SEEDS", "2"))


def random_fleet(rng: random.Random) -> tuple[ScaleSetsFile, dict[str, Host]]:
    hosts: dict[str, Host] = {}
    providers = ""
    for i in range(rng.randint(1, 3)):
        name = f"p{i}"
        hosts[name] = Host(vcpus=rng.choice([8, 16, 32]), memory_gib=rng.choice([16, 32, 64]))
        limit = rng.choice(["", "", "max_runners: 3, ", "max_runners: 6, "])
        providers += (
            f"  - {{name: {name}, type: fake, {limit}"
            f"weight: {rng.choice([1, 2])}, runner: {{vcpus: 2, memory: 4GiB}}}}\n"
        )
    scale_sets = ""
    for j in range(rng.randint(2, 3)):
        chosen = rng.sample(sorted(hosts), rng.randint(1, len(hosts)))
        size = rng.choice(["{vcpus: 2, memory: 4GiB}", "{vcpus: 4, memory: 8GiB}"])
        listed = ", ".join(f"{{name: {p}, runner: {size}}}" for p in chosen)
        scale_sets += (
            f"  - {{name: set{j}, max_runners: {rng.randint(2, 8)}, "
            f"priority: {rng.choice([0, 0, 10])}, placement: {rng.choice(['spread', 'pack'])}, "
            f"providers: [{listed}]}}\n"
        )
    text = (
        "version: 1\ntiming: {reconcile_interval: 30s, left_grace: 0s, unreachable_grace: 5m}\n"
        f"providers:\n{providers}scale_sets:\n{scale_sets}"
    )
    return parse_scale_sets(text, "seeded.yaml"), hosts


async def faulty_hour(root: Path, seed: int) -> VirtualFleet:
    """An hour of random bursts and faults, a restart among them, then until every job is done."""
    rng = random.Random(seed)
    cfg, hosts = random_fleet(rng)
    fleet = VirtualFleet(root, cfg, hosts, seed=seed)
    await fleet.start()
    names = [s.name for s in cfg.scale_sets]
    for _ in range(rng.randint(3, 8)):
        at = fleet.clock.now() + rng.uniform(0, 3600)
        fleet.queue_at(at, rng.choice(names), rng.randint(1, 10), rng.uniform(60, 1800))
    restart_at = rng.uniform(0, 3600)
    restarted = False
    elapsed = 0.0
    while elapsed < 3600:
        step = rng.uniform(10, 300)
        await fleet.run_for(step)
        elapsed += step
        provider = fleet.providers[rng.choice(sorted(fleet.providers))]
        fault = rng.randrange(6)
        if fault == 0:
            provider.refuse(rng.choice([RefusalKind.FULL, RefusalKind.FAILED]), count=2)
        elif fault == 1:
            provider.unanswered(count=1, after_create=rng.random() < 0.5)
        elif fault == 2:
            provider.fail_deletes(count=2)
        elif fault == 3:
            provider.fail_lists(count=rng.randint(1, 4))
        if not restarted and elapsed >= restart_at:
            # Whatever faults are scripted stay: a provider that fails its lists now does not
            # answer the new engine's first pass, and its runners must still count.
            await fleet.restart()
            restarted = True
    for provider in fleet.providers.values():
        provider.heal()
    await fleet.run_until_done(limit=12 * 3600)
    return fleet


@pytest.mark.parametrize("seed", seeds(range(SEEDS)))
async def test_every_job_runs_once_and_nothing_is_left_behind_across_faults_and_a_restart(
    tmp_path: Path, seed: int
) -> None:
    fleet = await faulty_hour(tmp_path, seed)
    assert all(j.started_at is not None for j in fleet.jobs.values()), f"seed {seed}"
    runners = [j.runner for j in fleet.jobs.values()]
    assert len(set(runners)) == len(runners), f"seed {seed}: an ephemeral runner ran two jobs"
    left = {name: fleet.machines_on(name) for name in fleet.providers}
    live = {r.name for r in fleet.engine.runners}
    assert all(set(machines) <= live for machines in left.values()), f"seed {seed}: {left}"
    registered = {r.name for r in fleet.github.runners.values()}
    assert registered <= live, f"seed {seed}: registrations left: {registered - live}"


@pytest.mark.parametrize("seed", seeds([3]))
async def test_the_same_seed_replays_the_same_run(tmp_path: Path, seed: int) -> None:
    first = await faulty_hour(tmp_path / "first", seed)
    again = await faulty_hour(tmp_path / "again", seed)
    assert len(first.trace()) > 20, "a run with something in it"
    assert first.trace() == again.trace()
