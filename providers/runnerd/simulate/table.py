"""``runnerd simulate``'s rows and table, as docs/admission.md shows them.

Rows: ``caps`` with the configured slots; the candidate slots under caps (``caps*`` when the
config check would refuse them under caps); ``measured`` with the candidate slots; one
``cpu ×N`` row per ``--cpu-overcommit`` (measured admission and a CPU budget of the slice's CPUs
times N). Candidate slots come from ``--slots name=N``; otherwise each profile gets as many as
MemoryMax holds of it alone at its cap, or its configured ones if more. A PEAKS over MemoryMax
is marked ``!``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rungar.model.units import format_bytes
from runnerd.admission import Policy
from runnerd.simulate.rows import ProfileShape, ReplayResult, Scenario

HEADER = (
    "POLICY    SLOTS                   WAIT P50  WAIT P95  WAIT MAX      MEAN AT ONCE    PEAKS"
    "   UNDER  HELD    CPU CPU HELD"
)


def candidate_slots(
    profiles: Mapping[str, ProfileShape],
    configured: Mapping[str, int],
    memory_max: int,
    mirror: int,
    asked: Mapping[str, int],
) -> dict[str, int]:
    out = {}
    for name, shape in profiles.items():
        if name in asked:
            out[name] = asked[name]
        else:
            out[name] = max(configured[name], (memory_max - mirror) // shape.memory)
    return out


def fits_caps(
    profiles: Mapping[str, ProfileShape], slots: Mapping[str, int], memory_max: int, mirror: int
) -> bool:
    """The config check under caps: slots × memory with the mirror within MemoryMax."""
    return mirror + sum(slots[n] * p.memory for n, p in profiles.items()) <= memory_max


def scenarios(
    profiles: Mapping[str, ProfileShape],
    configured: Mapping[str, int],
    candidate: Mapping[str, int],
    memory_max: int,
    mirror: int,
    cpu_factors: Sequence[float],
) -> list[Scenario]:
    rows = [Scenario("caps", Policy.CAPS, dict(configured))]
    if dict(candidate) != dict(configured):
        star = "" if fits_caps(profiles, candidate, memory_max, mirror) else "*"
        rows.append(Scenario(f"caps{star}", Policy.CAPS, dict(candidate)))
    rows.append(Scenario("measured", Policy.MEASURED, dict(candidate)))
    for factor in cpu_factors:
        rows.append(Scenario(f"cpu ×{factor:g}", Policy.MEASURED, dict(candidate), factor))
    return rows


def wait_text(seconds: float) -> str:
    """``0s``, ``57s``, ``4m19s``, ``2m08s``, ``1h02m``."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def cpu_text(value: float) -> str:
    return f"{round(value, 1):g}"


def slots_text(slots: Mapping[str, int]) -> str:
    return ", ".join(f"{name} {slots[name]}" for name in sorted(slots))


def row(result: ReplayResult, memory_max: int) -> str:
    peaks = format_bytes(result.peaks) + ("!" if result.peaks > memory_max else "")
    cpu_held = "-" if result.cpu_held is None else str(result.cpu_held)
    slots = slots_text(result.scenario.slots)
    return (
        f"{result.scenario.name:<10}{slots:<23} "
        f"{wait_text(result.wait_p50):>8}{wait_text(result.wait_p95):>10}"
        f"{wait_text(result.wait_max):>10}{wait_text(result.wait_mean):>10}"
        f"{result.at_once:>8}{peaks:>9}{result.under:>8}{result.held:>6}"
        f"{cpu_text(result.cpu):>7} {cpu_held:>8}"  # apart however many holds
    )


def render(
    results: Sequence[ReplayResult],
    jobs: int,
    memory_max: int,
    slice_cpus: float | None,
    span_note: str = "",
) -> str:
    """The whole output: what was replayed, the table, and what its columns mean. ``span_note``
    says which part of the window was replayed, when not all of it."""
    never = max((r.never_started for r in results), default=0)
    lines = [
        f"{jobs} finished jobs replayed against a MemoryMax of {format_bytes(memory_max)}, each "
        "queued when it was and running as long as it ran.",
        "PEAKS is every running job's peak added up at the busiest moment, with the mirror: more "
        "than the slice ever held, but a lower bound on what the daemon could overlap. The replay "
        "holds each running job at its peak, where the daemon admits against what jobs use while "
        "they warm up, and it leaves out start latency, seeds, shells and cancelled jobs.",
    ]
    if span_note:
        lines.append(span_note)
    if never:
        lines.append(
            f"{never} jobs never started: each needs more than the budget holds for one runner."
        )
    lines += ["", HEADER]
    lines += [row(r, memory_max) for r in results]
    lines.append("")
    if any(r.scenario.name == "caps*" for r in results):
        lines.append(
            "* more slots than the caps fit in MemoryMax, which the config check refuses with "
            'admission = "caps".'
        )
    lines.append(
        "UNDER: jobs that peaked above what admission reserved for them. HELD: times the "
        "high-water mark held back a job the predictions had room for."
    )
    if any(r.scenario.cpu_factor is not None for r in results):
        cpus = f"{slice_cpus:g}" if slice_cpus is not None else "?"
        lines.append(
            "cpu ×N: measured admission, and each runner reserves its job's predicted average "
            f"CPU of the slice's {cpus} CPUs times N. CPU: the most the running jobs' average "
            "CPUs added up to at once. CPU HELD: times the CPU budget held back a job memory and "
            "its slots had room for. The replay keeps each job's run time, so it shows what a CPU "
            "budget holds back, not how much sharing the CPUs slows the jobs."
        )
    if any(r.peaks > memory_max for r in results):
        lines.append("!: PEAKS over MemoryMax.")
    return "\n".join(lines)
