"""What the demo's hosts ran before the demo: a short history of the demo's own jobs.

A host that has run a team's jobs before knows how long they take and how much memory they
peak at (docs/admission.md): from its first refusal it can say when room comes back, and
measured admission reserves predicted peaks. The demo's hosts start as such hosts do, each with
its share of an earlier burst of the same workflows (another seed), run the day before, rather
than as new hosts that first have to learn, so the story the demo tells (a runner that waits for a
host's expected room instead of going to AWS) does not hang on which of its first jobs happen to
end before the overflow. The demo's summary counts only the jobs the demo itself ran.

The rows are written through runnerd's own history writer
(:func:`runnerd.history_generate.write_history`), as ``runnerd history generate`` writes its
realistic histories.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from runnerd.admission.model import FAILURE, SUCCESS
from runnerd.config import Profile, load_config
from runnerd.history import JobEnd, JobStart
from runnerd.history_generate import GeneratedJob, write_history

from rungar.model.job_key import JobKey
from rungar.testing.github_emulator.model import JobSpec

DAY = 86400.0
# A fake runner's own interpreter beside the memory its job allocates: what a host measures as
# the job's peak (the demo's hosts measure 10-25 MiB above the job's allocation).
INTERPRETER = 18 * 1024 * 1024
START_GAP = 2.0  # seconds between the starts of a host's past jobs, in the burst's order


def past_jobs(
    specs: Sequence[JobSpec],
    profiles: Mapping[str, Profile],
    host: int,
    hosts: int,
    clock_factor: float,
    now: float,
    seed: int,
) -> list[GeneratedJob]:
    """Host number ``host`` (of ``hosts``)'s share of an earlier burst: every ``hosts``-th of
    ``specs``, run a day before ``now`` in the profile ``profiles`` names for its scale set (the
    demo's scale sets are named as their label), each as long as GitHub's clock
    running ``clock_factor`` times faster makes it in real time, each peaking at its job's
    memory plus a fake runner's interpreter. Pure: the same arguments, the same rows."""
    rng = random.Random(seed * 1000 + host)
    jobs: list[GeneratedJob] = []
    start = now - DAY
    for i, spec in enumerate(specs[host::hosts]):
        scale_set = spec.labels[0]
        profile = profiles[scale_set]
        started = start + i * START_GAP
        finished = started + spec.duration / clock_factor
        cap = profile.memory
        peak = min(cap, spec.memory_bytes + INTERPRETER)
        runner = f"{scale_set}-before-{host}-{i}"
        begun = JobStart(
            runner=runner,
            scale_set=scale_set,
            profile=profile.name,
            cap_memory=cap,
            cap_cpus=profile.cpus,
            policy="measured",
            reserved_memory=cap,
            reserved_cpu=profile.cpus,
            basis="its cap, as its profile had no history yet",
            budget_free=None,
            slice_memory=None,
            started_at=started,
            queued_at=started,
        )
        key = JobKey(profile.name, spec.repository, spec.workflow, spec.name)
        result = SUCCESS if spec.result == "succeeded" else FAILURE
        cpu = round(spec.cpu * rng.uniform(0.8, 1.2), 3)
        ended = JobEnd(result, peak, cpu, False, False, 0, finished, exit_code=0)
        jobs.append(GeneratedJob(begun, key, ended, f"before-{host}-{i}"))
    return jobs


def host_pasts(
    specs: Sequence[JobSpec],
    profile_of: Mapping[str, str],
    hosts: int,
    clock_factor: float,
    now: float,
    seed: int,
) -> Callable[[int, Path], None]:
    """For :class:`rungar.demo.stack.Stack`'s ``past``: writes host number ``index``'s share of
    ``specs`` (:func:`past_jobs`) to the job history its ``runnerd.toml`` names, in the profiles
    ``profile_of`` names for each scale set, as that file defines them."""

    def write(index: int, toml: Path) -> None:
        config = load_config(toml)
        profiles = {scale_set: config.profiles[name] for scale_set, name in profile_of.items()}
        jobs = past_jobs(specs, profiles, index, hosts, clock_factor, now, seed)
        write_history(Path(config.host.history_path()), jobs)

    return write
