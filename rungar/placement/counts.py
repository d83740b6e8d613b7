"""What placement counts: runners per scale set and provider, the creates in flight (claims),
and the machines of runners gone but not yet deleted (docs/placement.md).

Pure, as all of :mod:`rungar.placement`. Each count is kept the ways a decision reads it, so a
decision costs O(providers of the scale set); a change of a scale set's own runners and claims
on a provider moves that provider in the scale set's kept order (:class:`ProviderOrder`).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from rungar.placement.index import ProviderOrder


@dataclass(frozen=True, slots=True)
class Claim:
    """A place taken on a provider for one create in flight."""

    id: int
    scale_set: str
    provider: str


class Counts:
    """Runners, claims and leaving machines; what a scale set and a provider hold."""

    def __init__(self, order: ProviderOrder) -> None:
        self._order = order
        self._runners: defaultdict[tuple[str, str], int] = defaultdict(int)
        self._runners_by_set: defaultdict[str, int] = defaultdict(int)
        self._runners_by_provider: defaultdict[str, int] = defaultdict(int)
        self._claims: dict[int, Claim] = {}
        self._claims_by_set: defaultdict[str, int] = defaultdict(int)
        self._claims_by_provider: defaultdict[str, int] = defaultdict(int)
        self._claims_by_pair: defaultdict[tuple[str, str], int] = defaultdict(int)
        self._leaving: defaultdict[str, int] = defaultdict(int)
        self._ids = itertools.count(1)

    # ----------------------------------------------------------------- runners

    def set_runners(self, counts: Iterable[tuple[str, str, int]]) -> None:
        """Replace the counted runners with ``(scale_set, provider, n)``; the caller reorders."""
        self._runners.clear()
        self._runners_by_set.clear()
        self._runners_by_provider.clear()
        for scale_set, provider, n in counts:
            if n:
                self._runners[(scale_set, provider)] += n
                self._runners_by_set[scale_set] += n
                self._runners_by_provider[provider] += n

    def add_runner(self, scale_set: str, provider: str) -> None:
        self._runners[(scale_set, provider)] += 1
        self._runners_by_set[scale_set] += 1
        self._runners_by_provider[provider] += 1
        self._moved(scale_set, provider)

    def remove_runner(self, scale_set: str, provider: str, *, leaving: bool) -> None:
        """A runner stops counting for its scale set; ``leaving`` keeps its machine counted."""
        key = (scale_set, provider)
        if self._runners[key] > 0:
            self._runners[key] -= 1
            self._runners_by_set[scale_set] -= 1
            self._runners_by_provider[provider] -= 1
            self._moved(scale_set, provider)
        if leaving:
            self._leaving[provider] += 1

    def machine_deleted(self, provider: str) -> None:
        if self._leaving[provider] > 0:
            self._leaving[provider] -= 1

    def set_leaving(self, provider: str, n: int) -> None:
        self._leaving[provider] = n

    # ----------------------------------------------------------------- claims

    def take(self, scale_set: str, provider: str) -> Claim:
        claim = Claim(next(self._ids), scale_set, provider)
        self._claims[claim.id] = claim
        self._claims_by_provider[provider] += 1
        self._claims_by_pair[(scale_set, provider)] += 1
        self._claims_by_set[scale_set] += 1
        self._moved(scale_set, provider)
        return claim

    def holds(self, claim: Claim) -> bool:
        return claim.id in self._claims

    def give_back(self, claim: Claim) -> None:
        """Give a claim back. Idempotent."""
        if self._claims.pop(claim.id, None) is None:
            return
        self._claims_by_provider[claim.provider] -= 1
        self._claims_by_pair[(claim.scale_set, claim.provider)] -= 1
        self._claims_by_set[claim.scale_set] -= 1
        self._moved(claim.scale_set, claim.provider)

    def claims(self) -> list[Claim]:
        return list(self._claims.values())

    # ----------------------------------------------------------------- reading

    def runners_of(self, scale_set: str, provider: str | None = None) -> int:
        if provider is not None:
            return self._runners[(scale_set, provider)]
        return self._runners_by_set[scale_set]

    def creating_of(self, scale_set: str) -> int:
        return self._claims_by_set[scale_set]

    def of_scale_set(self, scale_set: str) -> int:
        """Everything counted against a scale set's own ``max_runners``: its runners and its
        creates in flight."""
        return self._runners_by_set[scale_set] + self._claims_by_set[scale_set]

    def own(self, scale_set: str, provider: str) -> int:
        """The scale set's runners and creates in flight on the provider: what spread orders by."""
        key = (scale_set, provider)
        return self._runners.get(key, 0) + self._claims_by_pair.get(key, 0)

    def on_provider(self, provider: str) -> int:
        """Everything counted against a provider's limit: runners, claims, leaving machines."""
        return (
            self._runners_by_provider[provider]
            + self._claims_by_provider[provider]
            + self._leaving[provider]
        )

    def leaving_on(self, provider: str) -> int:
        return self._leaving[provider]

    def _moved(self, scale_set: str, provider: str) -> None:
        self._order.moved(scale_set, provider, self.own(scale_set, provider))
