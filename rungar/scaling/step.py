"""One scaling step as a plan: how many runners to create (and which of them refill the idle
reserve) and which idle ones to remove, from the scale set's decision, its live runners and the
creates already asked for (docs/architecture.md). The engine carries the plan out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rungar.model.runner import RunnerView
from rungar.scaling.decide import Desired, surplus_to_remove


@dataclass(frozen=True, slots=True)
class ScalePlan:
    target: int  # the runners the scale set wants now
    reserve: int  # of them, kept idle beyond the assigned jobs
    warm: int  # of the reserve, the warm pool's part
    # One entry per runner to create: True when it refills the idle reserve (it takes no
    # priority hold and yields to other scale sets' waiting work).
    create: tuple[bool, ...] = ()
    remove: tuple[str, ...] = ()  # idle surplus, outdated first, then oldest


def plan_scale(
    decision: Desired,
    *,
    removed: bool,
    live: Sequence[RunnerView],
    creating: int,
    revisions: Mapping[str, str],
) -> ScalePlan:
    """``removed``: the scale set is no longer configured (it drains to nothing); ``creating``:
    creates asked for and not done, which count as runners."""
    target = 0 if removed else decision.total
    reserve = 0 if removed else decision.reserve
    warm = 0 if removed else decision.warm
    have = len(live) + creating
    if have < target:
        work = 0 if removed else decision.work
        return ScalePlan(
            target, reserve, warm, create=tuple(n >= work for n in range(have, target))
        )
    if len(live) > target:
        surplus = surplus_to_remove(live, len(live) - target, revisions)
        return ScalePlan(target, reserve, warm, remove=tuple(surplus))
    return ScalePlan(target, reserve, warm)
