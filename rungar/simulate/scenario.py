"""The what-ifs of ``rungar simulate``: each one the baseline with one thing changed.

A scenario rewrites the configuration (placement, priorities, provider limits, providers
removed or a runnerd host added), the runnerd hosts' admission, or the history's pace, and
builds fresh providers for its replay, so rows never share state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from rungar.config.model import (
    HoldChoice,
    Placement,
    ProviderConfig,
    ScaleSetConfig,
    ScaleSetProvider,
    ScaleSetsFile,
    WarmPool,
)
from rungar.errors import ConfigError
from rungar.simulate.backends import Backend, RunnerdHost
from rungar.simulate.history import SimJob, sped_up
from rungar.simulate.models import RUNNERD_BOOT, Models, ProviderModel, _fill


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str = "baseline"
    placement: Placement | None = None
    no_priority: bool = False
    hold_one: bool = False  # the older rule: one provider held, not every full one
    hold: HoldChoice | None = None  # every scale set's ``hold`` this
    admission: str | None = None  # caps | measured, every runnerd host
    add_host: str = ""  # a runnerd.toml
    remove_provider: str = ""
    max_runners: tuple[str, int] | None = None
    speed: float = 1.0
    no_warm_pool: bool = False
    warm_pool: int = 0  # every scale set with warm_pool.max this (its other keys kept)


def what_ifs(
    placements: Sequence[str],
    no_priority: bool,
    admissions: Sequence[str],
    add_hosts: Sequence[str],
    removes: Sequence[str],
    max_runners: Sequence[str],
    speeds: Sequence[float],
    no_warm_pool: bool = False,
    warm_pools: Sequence[int] = (),
    hold_one: bool = False,
    holds: Sequence[str] = (),
) -> list[Scenario]:
    """The baseline, then one row per what-if in the order the flags are listed here."""
    rows = [Scenario()]
    rows += [Scenario(f"placement {p}", placement=Placement(p)) for p in placements]
    if no_priority:
        rows.append(Scenario("no priority", no_priority=True))
    if hold_one:
        rows.append(Scenario("hold one", hold_one=True))
    rows += [Scenario(f"hold {h}", hold=HoldChoice(h)) for h in holds]
    rows += [Scenario(f"admission {a}", admission=a) for a in admissions]
    rows += [Scenario(f"add host {Path(f).stem}", add_host=f) for f in add_hosts]
    rows += [Scenario(f"remove {p}", remove_provider=p) for p in removes]
    for text in max_runners:
        provider, _, number = text.partition("=")
        if not provider or not number.isdigit():
            raise ConfigError([f"--max-runners {text}: must be PROVIDER=N"])
        rows.append(Scenario(f"{provider} max {number}", max_runners=(provider, int(number))))
    for speed in speeds:
        if speed <= 0:
            raise ConfigError([f"--speed {speed:g}: must be more than 0"])
        rows.append(Scenario(f"speed x{speed:g}", speed=speed))
    if no_warm_pool:
        rows.append(Scenario("no warm pool", no_warm_pool=True))
    for most in warm_pools:
        if most < 1:
            raise ConfigError([f"--warm-pool {most}: must be at least 1"])
        rows.append(Scenario(f"warm pool {most}", warm_pool=most))
    return rows


def configure(
    scenario: Scenario, config: ScaleSetsFile, models: Models
) -> tuple[ScaleSetsFile, Models]:
    """The configuration and models this scenario replays."""
    providers = list(config.providers)
    scale_sets = list(config.scale_sets)
    known = {p.name for p in providers}
    if scenario.remove_provider:
        gone = scenario.remove_provider
        if gone not in known:
            raise ConfigError([f"--remove-provider {gone}: no provider of that name"])
        providers = [p for p in providers if p.name != gone]
        scale_sets = [
            replace(s, providers=tuple(e for e in s.providers if e.name != gone))
            for s in scale_sets
        ]
        scale_sets = [s for s in scale_sets if s.providers]
    if scenario.max_runners is not None:
        name, limit = scenario.max_runners
        if name not in known:
            raise ConfigError([f"--max-runners {name}={limit}: no provider of that name"])
        providers = [replace(p, max_runners=limit) if p.name == name else p for p in providers]
    if scenario.placement is not None:
        scale_sets = [replace(s, placement=scenario.placement) for s in scale_sets]
    if scenario.no_priority:
        scale_sets = [replace(s, priority=0) for s in scale_sets]
    if scenario.hold is not None:
        scale_sets = [replace(s, hold=scenario.hold) for s in scale_sets]
    # A modelled price is the provider's price for placement too (reserves cheapest first).
    providers = [
        replace(p, price_per_hour=models.of(p.name).price_per_hour)
        if p.price_per_hour is None and models.of(p.name).price_per_hour
        else p
        for p in providers
    ]
    if scenario.no_warm_pool:
        scale_sets = [replace(s, warm_pool=None) for s in scale_sets]
    if scenario.warm_pool:
        most = scenario.warm_pool
        scale_sets = [
            replace(
                s,
                warm_pool=replace(s.warm_pool or WarmPool(most), max=min(most, s.max_runners)),
            )
            for s in scale_sets
        ]
    if scenario.add_host:
        config_models, providers, scale_sets = _add_host(
            scenario.add_host, models, providers, scale_sets
        )
        models = config_models
    return replace(config, providers=tuple(providers), scale_sets=tuple(scale_sets)), models


def _add_host(
    path: str,
    models: Models,
    providers: list[ProviderConfig],
    scale_sets: list[ScaleSetConfig],
) -> tuple[Models, list[ProviderConfig], list[ScaleSetConfig]]:
    try:
        raw = Path(path).read_text()
    except OSError as e:
        raise ConfigError([f"--add-host {path}: cannot be read: {e.strerror or e}"]) from None
    hosts = [p for p in providers if models.of(p.name).is_runnerd]
    name = Path(path).stem
    taken = {p.name for p in providers}
    while name in taken:
        name += "-added"
    like = hosts[0] if hosts else None
    filled = _fill(raw, {"NAME": name})
    new = ProviderConfig(name=name, type="runnerd", weight=like.weight if like else 1.0)
    providers = [*providers, new]
    out = []
    for s in scale_sets:
        entries = list(s.providers)
        block = next((e.runner for e in entries if like and e.name == like.name), None)
        if like is None or block is not None:
            entries.append(ScaleSetProvider(name, block or {}))
        out.append(replace(s, providers=tuple(entries)))
    added = ProviderModel(name, filled, path, boot=RUNNERD_BOOT)
    return Models({**models.providers, name: added}, models.scale_sets), providers, out


def backends(
    scenario: Scenario, config: ScaleSetsFile, models: Models, start: float
) -> dict[str, Backend]:
    """Fresh providers for one replay; a runnerd provider without a model is an error."""
    out: dict[str, Backend] = {}
    problems = []
    for provider in config.providers:
        model = models.of(provider.name)
        if model.is_runnerd:
            try:
                out[provider.name] = RunnerdHost(model, start, scenario.admission)
            except ConfigError as e:
                problems += e.problems
        elif provider.type == "runnerd":
            problems.append(
                f"provider {provider.name} is a runnerd host: give its runnerd.toml in the "
                "models file (providers.NAME.runnerd)"
            )
        else:
            out[provider.name] = Backend(model, start)
    if problems:
        raise ConfigError(problems)
    return out


def jobs_for(scenario: Scenario, jobs: Sequence[SimJob]) -> list[SimJob]:
    return sped_up(jobs, scenario.speed)
