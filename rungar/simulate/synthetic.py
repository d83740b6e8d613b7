"""Fleets and histories made up for tests and ``benchmarks/fleet.py``: every figure there is
measured on one of these, so anyone can rerun it.

- :func:`fragmented_fleet`: small runners keep two hosts busy while large ones of higher
  priority ask now and then (the Priority section of docs/placement's example).
- :func:`generated_fleet`: ``runnerd history generate``'s jobs on its own hosts, with clouds for
  overflow (``pack``: hosts first).
- :func:`rush_fleet`: a nightly matrix and a weekday morning rush on one cloud, with warm
  pools.
All of them are pure functions of their arguments and a seed.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace

from rungar.config.loader import parse_scale_sets
from rungar.config.model import ScaleSetsFile
from rungar.simulate.history import SimJob
from rungar.simulate.models import RUNNERD_BOOT, Models, ProviderModel

GiB = 1024**3
DAY = 86400.0
START = 1_800_000_000.0

HOST_TOML = """\
[host]
slice = "runnerd.slice"
memory_max = "{memory_max}"
admission = "{admission}"
cpus = 32

[sizing]
min_jobs = 10
{profiles}"""

PROFILE_TOML = """
[profiles.{name}]
image = "runner:{name}"
cpus = {cpus}
memory = "{memory}"
slots = {slots}
"""


def host_toml(
    memory_max: str, admission: str, profiles: Sequence[tuple[str, int, str, int]]
) -> str:
    """A runnerd.toml: ``profiles`` as (name, cpus, memory, slots)."""
    text = "".join(
        PROFILE_TOML.format(name=n, cpus=c, memory=m, slots=s) for n, c, m, s in profiles
    )
    return HOST_TOML.format(memory_max=memory_max, admission=admission, profiles=text)


def fragmented_fleet(
    *, hosts: int = 2, days: float = 2.0, small_per_hour: float = 30.0,
    large_per_hour: float = 1.5, seed: int = 1,
) -> tuple[ScaleSetsFile, Models, list[SimJob]]:  # fmt: skip
    """Hosts of 32G; small runners (4G) and large ones (16G, priority 10) share them.

    Small jobs arrive at ``small_per_hour`` and run 10-30 minutes, enough to keep the hosts
    mostly full of small runners; a large job (20-40 minutes) needs four small ones gone from
    one host at once."""
    names = [f"compute{i + 1}" for i in range(hosts)]
    providers = "".join(f"  - {{ name: {n}, type: runnerd, address: 'unix:///run/{n}.sock' }}\n"
                        for n in names)  # fmt: skip
    small = "".join(f"      - {{ name: {n}, runner: {{ profile: small }} }}\n" for n in names)
    large = "".join(f"      - {{ name: {n}, runner: {{ profile: large }} }}\n" for n in names)
    text = (
        "version: 1\nproviders:\n" + providers + "scale_sets:\n"
        "  - name: small\n    max_runners: 40\n    providers:\n" + small
        + "  - name: large\n    max_runners: 4\n    priority: 10\n    providers:\n" + large
    )  # fmt: skip
    config = parse_scale_sets(text, "fragmented.yaml")
    toml = host_toml("32G", "caps", [("small", 2, "4G", 8), ("large", 8, "16G", 2)])
    models = Models({n: ProviderModel(n, toml, f"{n}.toml", boot=RUNNERD_BOOT) for n in names})
    rng = random.Random(seed)
    jobs: list[SimJob] = []
    for label, rate, minutes in (
        ("small", small_per_hour, (10, 30)),
        ("large", large_per_hour, (20, 40)),
    ):
        at = START
        while True:
            at += rng.expovariate(rate / 3600.0)
            if at >= START + days * DAY:
                break
            duration = rng.uniform(*minutes) * 60.0
            jobs.append(SimJob(label, "acme/app", "ci", label, at, duration, 0, 0, None,
                               "success", label))  # fmt: skip
    jobs.sort(key=lambda j: (j.queued_at, j.label))
    return config, models, jobs


def generated_jobs(jobs: int, days: float, seed: int, scale_set: str = "") -> list[SimJob]:
    """``runnerd history generate``'s jobs, in memory; each in ``scale_set`` or its profile's."""
    from runnerd.history_generate import generate

    out = [
        SimJob(
            label=g.key.profile,
            repository=g.key.repository,
            workflow=g.key.workflow,
            job=g.key.job,
            queued_at=g.start.queued_at or g.start.started_at,
            duration=max(0.0, g.end.finished_at - g.start.started_at),
            peak=g.end.peak_memory,
            cap=g.start.cap_memory,
            avg_cpu=g.end.avg_cpu,
            result=g.end.result,
            scale_set=scale_set or g.key.profile,
        )
        for g in generate(jobs, days, seed, START + days * DAY)
    ]
    out.sort(key=lambda j: (j.queued_at, j.label, j.repository, j.workflow, j.job))
    return out


def generated_fleet(
    *, jobs: int, days: float, hosts: int, clouds: int, seed: int = 1,
    admission: str = "caps", placement: str = "pack", slots_share: float = 1.0,
) -> tuple[ScaleSetsFile, Models, list[SimJob]]:  # fmt: skip
    """Generated jobs (profiles jvm and node) on ``hosts`` runnerd hosts, each sized by
    ``runnerd history generate`` for its share of the jobs times ``slots_share``, then
    ``clouds`` clouds for overflow. Scale sets jvm and node, both ``placement``."""
    from runnerd.history_generate import host_for

    profiles, memory_max = host_for(max(1, int(jobs * slots_share / max(1, hosts))), days)
    if admission == "measured":  # the slots the slice holds once runners reserve predictions
        from runnerd.history_generate import MIRROR
        from runnerd.simulate.rows import ProfileShape
        from runnerd.simulate.table import candidate_slots

        shapes = {p.name: ProfileShape(p.memory, p.cpus) for p in profiles}
        more = candidate_slots(shapes, {p.name: p.slots for p in profiles}, memory_max, MIRROR, {})
        profiles = tuple(replace(p, slots=more[p.name]) for p in profiles)
    toml = host_toml(
        f"{memory_max // GiB}G",
        admission,
        [(p.name, int(p.cpus), f"{p.memory // GiB}G", p.slots) for p in profiles],
    )
    host_names = [f"host{i + 1}" for i in range(hosts)]
    cloud_names = [f"cloud{i + 1}" for i in range(clouds)]
    providers = "".join(
        f"  - {{ name: {n}, type: runnerd, weight: 2, address: 'unix:///run/{n}.sock' }}\n"
        for n in host_names
    ) + "".join(
        f"  - {{ name: {n}, type: fake }}\n"
        for n in cloud_names
    )  # fmt: skip
    entries = "".join(f"      - {n}\n" for n in host_names + cloud_names)
    sets = "".join(
        f"  - name: {p.name}\n    max_runners: 200\n    placement: {placement}\n"
        f"    providers:\n{entries}"
        for p in profiles
    )
    config = parse_scale_sets(
        "version: 1\nproviders:\n" + providers + "scale_sets:\n" + sets, "generated.yaml"
    )
    models = {n: ProviderModel(n, toml, f"{n}.toml", boot=RUNNERD_BOOT) for n in host_names}
    for i, n in enumerate(cloud_names):
        models[n] = ProviderModel(n, quota=50, boot=45.0 + 15 * i, price_per_hour=0.40 + 0.05 * i)
    return config, Models(models), generated_jobs(jobs, days, seed)


def rush_fleet(
    *, days: int = 28, matrix: int = 12, rush_jobs: int = 8, per_hour: float = 1.0,
    boot: float = 90.0, warm_max: int = 16, seed: int = 1,
) -> tuple[ScaleSetsFile, Models, list[SimJob]]:  # fmt: skip
    """Two scale sets on one cloud, both with ``warm_pool: {max: warm_max}``:

    - ``nightly``: a scheduled workflow's matrix of about ``matrix`` jobs queued within two
      minutes of 02:00 UTC every day: demand the history predicts well;
    - ``ci``: weekdays open with about ``rush_jobs`` jobs between 08:15 and 08:25 UTC, then
      ``per_hour`` jobs at random moments until 18:00: a rush it predicts, then random traffic
      it cannot; nights and weekends are quiet.

    Each job runs 5-15 minutes; the cloud boots in ``boot`` seconds and costs 0.10 an hour.
    ``days`` from a Monday."""
    sets = "".join(
        f"  - name: {name}\n    max_runners: 40\n    providers: [cloud]\n"
        f"    warm_pool: {{ max: {warm_max} }}\n"
        for name in ("nightly", "ci")
    )
    text = "version: 1\nproviders:\n  - { name: cloud, type: fake }\nscale_sets:\n" + sets
    config = parse_scale_sets(text, "rush.yaml")
    models = Models({"cloud": ProviderModel("cloud", boot=boot, price_per_hour=0.10)})
    rng = random.Random(seed)
    monday = START - (START % (7 * DAY)) + 4 * DAY  # the epoch began on a Thursday
    jobs: list[SimJob] = []

    def add(label: str, at: float) -> None:
        duration = rng.uniform(5, 15) * 60.0
        jobs.append(SimJob(label, "acme/app", label, "build", at, duration, 0, 0, None,
                           "success", label))  # fmt: skip

    for day in range(days):
        midnight = monday + day * DAY
        for _ in range(max(0, round(rng.gauss(matrix, 1.0)))):
            add("nightly", midnight + 2 * 3600 + rng.uniform(0, 120))
        if day % 7 >= 5:
            continue
        for _ in range(max(0, round(rng.gauss(rush_jobs, 1.5)))):
            add("ci", midnight + 8 * 3600 + 15 * 60 + rng.uniform(0, 600))
        at = midnight + 8.5 * 3600
        while True:
            at += rng.expovariate(per_hour / 3600.0)
            if at >= midnight + 18 * 3600:
                break
            add("ci", at)
    jobs.sort(key=lambda j: (j.queued_at, j.label))
    return config, models, jobs
