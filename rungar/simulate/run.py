"""Reading the inputs of ``rungar simulate`` and replaying every scenario."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rungar.config.loader import load_scale_sets
from rungar.config.model import ScaleSetsFile
from rungar.errors import ConfigError
from rungar.placement import HoldRule
from rungar.simulate.history import SimJob, assign_scale_sets, load_jobs
from rungar.simulate.models import Models, load_models
from rungar.simulate.report import Row, as_json, render
from rungar.simulate.scenario import Scenario, backends, configure, jobs_for, what_ifs
from rungar.simulate.world import World, WorldResult


@dataclass(frozen=True, slots=True)
class SimulateRequest:
    config: str
    histories: tuple[str, ...]
    models: str = ""
    mapping: Mapping[str, str] = field(default_factory=dict)
    placements: tuple[str, ...] = ()
    no_priority: bool = False
    admissions: tuple[str, ...] = ()
    add_hosts: tuple[str, ...] = ()
    removes: tuple[str, ...] = ()
    max_runners: tuple[str, ...] = ()
    speeds: tuple[float, ...] = ()
    no_warm_pool: bool = False
    warm_pools: tuple[int, ...] = ()
    hold_one: bool = False
    holds: tuple[str, ...] = ()
    found: Models | None = None  # what discover() found; the models file's entries win


@dataclass(frozen=True, slots=True)
class SimulateReport:
    jobs: int
    text: str
    json: dict[str, Any]


def replay_one(
    scenario: Scenario, config: ScaleSetsFile, models: Models, jobs: list[SimJob]
) -> Row:
    """One row: the scenario's configuration, fresh providers, the jobs at its pace."""
    import asyncio

    world, models = world_for(scenario, config, models, jobs)
    result: WorldResult = asyncio.run(world.run())
    made = world.backends
    priced = frozenset(n for n, b in made.items() if not models.of(n).is_runnerd)
    warm = "without" if scenario.no_warm_pool else "with" if scenario.warm_pool else ""
    return Row(scenario.name, result, priced, warm)


def world_for(
    scenario: Scenario,
    config: ScaleSetsFile,
    models: Models,
    jobs: list[SimJob],
    kind: type[World] = World,
) -> tuple[World, Models]:
    """The replay of one row, not yet run (``kind``: a :class:`World` that watches more), and
    the models it replays."""
    config, models = configure(scenario, config, models)
    paced = jobs_for(scenario, jobs)
    start = paced[0].queued_at if paced else 0.0
    made = backends(scenario, config, models, start)
    rule = HoldRule.ONE if scenario.hold_one else HoldRule.EVERY_FULL
    return kind(config, made, paced, hold_rule=rule), models


def simulate(request: SimulateRequest) -> SimulateReport:
    config = load_scale_sets(request.config)
    given = load_models(request.models) if request.models else Models()
    base = request.found or Models()
    models = Models({**base.providers, **given.providers}, {**base.scale_sets, **given.scale_sets})
    mapping = {**models.scale_sets, **request.mapping}
    jobs = assign_scale_sets(
        load_jobs(request.histories), [s.name for s in config.scale_sets], mapping
    )
    if not jobs:
        raise ConfigError([f"{', '.join(request.histories)}: no finished jobs to replay"])
    scenarios = what_ifs(
        request.placements,
        request.no_priority,
        request.admissions,
        request.add_hosts,
        request.removes,
        request.max_runners,
        request.speeds,
        request.no_warm_pool,
        request.warm_pools,
        request.hold_one,
        request.holds,
    )
    rows = tuple(replay_one(s, config, models, jobs) for s in scenarios)
    days = (jobs[-1].queued_at - jobs[0].queued_at) / 86400.0
    return SimulateReport(len(jobs), render(rows, len(jobs), days), as_json(rows, len(jobs)))
