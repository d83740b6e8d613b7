"""Each scale set's providers kept in its placement order as counts change (docs/placement.md).

A fleet of on-prem hosts is one provider per host, so a scale set may list a thousand. Ordering
them all for every runner placed (:func:`rungar.placement.order.order_providers`) makes a
decision cost every provider; this keeps each scale set's order standing and moves one provider
when its count changes, so a decision walks from the front and stops at the first providers it
can try (:meth:`rungar.placement.Fleet.first_tryable`).

- spread: by the scale set's own runners and claims on the provider ÷ its weight, moved on each
  claim, release, runner counted and runner removed;
- pack: by weight, highest first, fixed until the configuration changes.

Ties keep the scale set's listed order, as the stable sort does, so the order is the one
:func:`order_providers` gives, key for key (tests compare the two on random fleets).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Sequence

from rungar.config.model import Placement, ScaleSetConfig

_Key = tuple[float, int, str]  # the sort key, then the provider's name


class ProviderOrder:
    """Every scale set's providers in its placement order, updated one provider at a time."""

    def __init__(self) -> None:
        self._order: dict[str, list[_Key]] = {}
        self._keys: dict[tuple[str, str], _Key] = {}  # spread: (scale set, provider) -> key
        self._weights: dict[str, dict[str, float]] = {}  # spread: scale set -> provider -> weight

    def rebuild(
        self,
        scale_sets: Sequence[ScaleSetConfig],
        weight: Callable[[str], float],
        own: Callable[[str, str], int],
    ) -> None:
        """Order every scale set afresh (a new configuration, or counts replaced at once)."""
        self._order.clear()
        self._keys.clear()
        self._weights.clear()
        for config in scale_sets:
            names = [entry.name for entry in config.providers]
            if config.placement is Placement.PACK:
                keys = [(-weight(name), k, name) for k, name in enumerate(names)]
            else:
                weights = {name: weight(name) for name in names}
                self._weights[config.name] = weights
                keys = [
                    (own(config.name, name) / weights[name], k, name)
                    for k, name in enumerate(names)
                ]
                for key in keys:
                    self._keys[(config.name, key[2])] = key
            keys.sort()
            self._order[config.name] = keys

    def moved(self, scale_set: str, provider: str, own: int) -> None:
        """The scale set's own runners and claims on ``provider`` are now ``own``."""
        old = self._keys.get((scale_set, provider))
        if old is None:  # pack, or a provider the scale set does not list
            return
        new = (own / self._weights[scale_set][provider], old[1], provider)
        if new == old:
            return
        order = self._order[scale_set]
        del order[bisect.bisect_left(order, old)]
        bisect.insort(order, new)
        self._keys[(scale_set, provider)] = new

    def walk(self, scale_set: str) -> Iterator[str]:
        """The scale set's providers in its order, first to try first. Do not change the
        counts while walking: take what is needed, then claim."""
        for key in self._order.get(scale_set, ()):
            yield key[2]

    def ordered(self, scale_set: str) -> list[str]:
        return [key[2] for key in self._order.get(scale_set, ())]
