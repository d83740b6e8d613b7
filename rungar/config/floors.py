"""Floors that cannot fit: a scale set's ``min_runners`` more than its providers may hold
(docs/scale-sets.md, "Limits").

A provider's ``max_runners`` caps the runners of every scale set placed on it, so a floor is
only kept if the providers it lists may hold it: alone (each floor of a scale set, its
``min_runners`` and each schedule window's, against the sum of its providers' limits), and
together with the other scale sets sharing them (their ``min_runners``, kept at once, against
the providers they list between them). A provider without ``max_runners`` may hold any number,
and so may every scale set listing it. Pure: the loader reports what this finds at the keys it
names, every problem at once.

Together, the floors fit exactly when a placement of every scale set's ``min_runners`` on its
own providers within their limits exists: the largest flow from the scale sets (each its floor)
through the providers they list (each its limit). When it falls short, the scale sets still
reachable from the source in what is left of the flow are those that cannot all fit on the
providers they list between them, whatever the placement (Hall's condition): each of them is
named, with those providers.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from rungar.config.model import ProviderConfig, ScaleSetConfig


@dataclass(frozen=True, slots=True)
class FloorProblem:
    scale_set: str
    key: str  # "min_runners", or "schedule.windows[N].min_runners"
    message: str


def floor_problems(
    providers: Sequence[ProviderConfig], scale_sets: Sequence[ScaleSetConfig]
) -> list[FloorProblem]:
    """Every floor that cannot fit, alone and then together; in the scale sets' order."""
    limits = {p.name: p.max_runners for p in providers}
    found = _alone(limits, scale_sets)
    alone = {f.scale_set for f in found}
    found += _together(limits, [s for s in scale_sets if s.name not in alone])
    order = {s.name: i for i, s in enumerate(scale_sets)}
    return sorted(found, key=lambda f: order[f.scale_set])


def _limited(limits: dict[str, int], scale_set: ScaleSetConfig) -> list[str] | None:
    """The scale set's providers, when every one has a limit (else None: its floor fits)."""
    names = list(dict.fromkeys(p.name for p in scale_set.providers))
    if any(limits.get(name, 0) <= 0 for name in names):
        return None
    return names


def _described(limits: dict[str, int], names: Sequence[str]) -> str:
    each = ", ".join(f"{name} max_runners {limits[name]}" for name in names)
    return f"{sum(limits[name] for name in names)} ({each})"


def _alone(limits: dict[str, int], scale_sets: Sequence[ScaleSetConfig]) -> list[FloorProblem]:
    found = []
    for scale_set in scale_sets:
        names = _limited(limits, scale_set)
        if names is None:
            continue
        room = sum(limits[name] for name in names)
        floors = [("min_runners", scale_set.min_runners)]
        if scale_set.schedule is not None:
            floors += [
                (f"schedule.windows[{i}].min_runners", w.min_runners)
                for i, w in enumerate(scale_set.schedule.windows)
            ]
        for key, floor in floors:
            if floor > room:
                found.append(
                    FloorProblem(
                        scale_set.name,
                        key,
                        f"is {floor}, more than its providers may hold: "
                        f"{_described(limits, names)}",
                    )
                )
    return found


def _together(limits: dict[str, int], scale_sets: Sequence[ScaleSetConfig]) -> list[FloorProblem]:
    """The scale sets whose ``min_runners`` cannot all be kept at once on the limited
    providers they share (each fits alone)."""
    demand: dict[str, int] = {}
    lists: dict[str, list[str]] = {}
    for scale_set in scale_sets:
        names = _limited(limits, scale_set)
        if names is not None and scale_set.min_runners > 0:
            demand[scale_set.name] = scale_set.min_runners
            lists[scale_set.name] = names
    flow: dict[tuple[str, str], int] = {}  # (scale set, provider) -> runners placed
    used = dict.fromkeys(limits, 0)
    placed = dict.fromkeys(demand, 0)
    for name in demand:
        while placed[name] < demand[name] and _augment(name, lists, limits, flow, used):
            placed[name] += 1
    if all(placed[n] == demand[n] for n in demand):
        return []
    # Scale sets and providers still reachable from those short of their floor: together they
    # ask for more than those providers hold.
    stuck = {n for n in demand if placed[n] < demand[n]}
    sets, reached = _reachable(stuck, lists, limits, flow, used)
    shared = [p for p in limits if p in reached]
    asked = " + ".join(f"{n} {demand[n]}" for n in demand if n in sets)
    total = sum(demand[n] for n in sets)
    return [
        FloorProblem(
            name,
            "min_runners",
            f"is {demand[name]}; the min_runners of the scale sets sharing its providers "
            f"cannot all be kept: {asked} = {total}, more than those providers may hold: "
            f"{_described(limits, shared)}",
        )
        for name in demand
        if name in sets
    ]


Node = tuple[str, str]  # ("set", scale set) or ("provider", provider)


def _augment(
    start: str,
    lists: dict[str, list[str]],
    limits: dict[str, int],
    flow: dict[tuple[str, str], int],
    used: dict[str, int],
) -> bool:
    """Place one more runner of ``start``, moving others' placed runners along a path if need
    be (a breadth-first augmenting path); False when no path exists."""
    came: dict[Node, Node | None] = {("set", start): None}
    queue = deque([start])
    while queue:
        scale_set = queue.popleft()
        for provider in lists[scale_set]:
            node = ("provider", provider)
            if node in came:
                continue
            came[node] = ("set", scale_set)
            if used[provider] < limits[provider]:
                _apply_path(node, came, flow, used)
                return True
            for (other, p), n in flow.items():
                if p == provider and n > 0 and ("set", other) not in came:
                    came[("set", other)] = node  # other moves a runner off this provider
                    queue.append(other)
    return False


def _apply_path(
    end: Node,
    came: dict[Node, Node | None],
    flow: dict[tuple[str, str], int],
    used: dict[str, int],
) -> None:
    used[end[1]] += 1
    node = end
    while (previous := came[node]) is not None:
        if node[0] == "provider":  # the scale set before it places one more there
            flow[(previous[1], node[1])] = flow.get((previous[1], node[1]), 0) + 1
        else:  # this scale set moves one runner off the provider before it
            flow[(node[1], previous[1])] -= 1
        node = previous


def _reachable(
    stuck: set[str],
    lists: dict[str, list[str]],
    limits: dict[str, int],
    flow: dict[tuple[str, str], int],
    used: dict[str, int],
) -> tuple[set[str], set[str]]:
    """Scale sets and providers reachable from ``stuck`` in the residual graph."""
    sets, providers = set(stuck), set[str]()
    queue = deque(stuck)
    while queue:
        scale_set = queue.popleft()
        for provider in lists[scale_set]:
            if provider in providers:
                continue
            providers.add(provider)
            for (other, p), n in flow.items():
                if p == provider and n > 0 and other not in sets:
                    sets.add(other)
                    queue.append(other)
    return sets, providers
