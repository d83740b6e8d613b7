"""The order kept as counts change is the order a full sort gives, on random fleets.

``Fleet.first_tryable`` and ``Fleet.candidates`` walk each scale set's providers in an order
kept up to date one provider at a time (rungar/placement/index.py); ``order_providers`` sorts
them all afresh, as placement did before. Hypothesis builds random fleets (weights that tie,
limits, disabled providers, spread and pack) and drives them through claims, creations,
refusals, removals, counts replaced at once, new weights, reachability, runtime switches,
holds and time; after every step the orders agree for every scale set and every number of
providers asked for.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from rungar.config.model import (
    Placement,
    ProviderConfig,
    ScaleSetConfig,
    ScaleSetProvider,
    Timing,
)
from rungar.model.machine import Refusal, RefusalKind
from rungar.placement import Fleet
from rungar.placement.fleet import Claim
from rungar.placement.order import order_providers

WEIGHTS = st.sampled_from([0.5, 1.0, 1.0, 2.0, 3.0])  # repeated weights: ties are common
TIMING = Timing(backoff_first=15, backoff_max=120)


@st.composite
def fleets(draw: st.DrawFn) -> tuple[list[ProviderConfig], list[ScaleSetConfig]]:
    count = draw(st.integers(1, 12))
    providers = [
        ProviderConfig(
            f"p{i}",
            "fake",
            weight=draw(WEIGHTS),
            max_runners=draw(st.sampled_from([0, 0, 1, 2, 5])),
            disabled=draw(st.booleans()) and draw(st.booleans()),
        )
        for i in range(count)
    ]
    names = [p.name for p in providers]
    scale_sets = []
    for j in range(draw(st.integers(1, 3))):
        listed = draw(st.permutations(names))[: draw(st.integers(1, count))]
        scale_sets.append(
            ScaleSetConfig(
                f"s{j}",
                draw(st.integers(1, 12)),
                tuple(ScaleSetProvider(n) for n in listed),
                priority=draw(st.sampled_from([0, 5, 10])),
                placement=draw(st.sampled_from([Placement.SPREAD, Placement.PACK])),
            )
        )
    return providers, scale_sets


class IndexedOrder(RuleBasedStateMachine):
    fleet: Fleet
    providers: list[ProviderConfig]
    scale_sets: list[ScaleSetConfig]

    @initialize(built=fleets())
    def build(self, built: tuple[list[ProviderConfig], list[ScaleSetConfig]]) -> None:
        self.providers, self.scale_sets = built
        self.fleet = Fleet(self.providers, self.scale_sets, TIMING)
        self.now = 0.0
        self.claims: list[Claim] = []
        self.runners: list[tuple[str, str]] = []

    def _scale_set(self, data: st.DataObject) -> ScaleSetConfig:
        return data.draw(st.sampled_from(self.scale_sets))

    @rule(data=st.data(), first=st.booleans())
    def claim(self, data: st.DataObject, first: bool) -> None:
        config = self._scale_set(data)
        if first:  # what a decision does: the first it may try
            found = self.fleet.first_tryable(config.name, self.now, 1)
            if not found:
                return
            provider = found[0]
        else:
            provider = data.draw(st.sampled_from(config.providers)).name
        claim = self.fleet.claim(config.name, provider, self.now)
        if isinstance(claim, Claim):
            self.claims.append(claim)

    @precondition(lambda self: self.claims)
    @rule(data=st.data(), outcome=st.sampled_from(["created", "full", "failed", "released"]))
    def settle(self, data: st.DataObject, outcome: str) -> None:
        claim = self.claims.pop(data.draw(st.integers(0, len(self.claims) - 1)))
        if outcome == "created":
            self.fleet.record_created(claim, self.now)
            self.runners.append((claim.scale_set, claim.provider))
        elif outcome == "released":
            self.fleet.abandon(claim, self.now)
        else:
            self.fleet.release(claim)
            kind = RefusalKind.FULL if outcome == "full" else RefusalKind.FAILED
            self.fleet.record_refusal(
                claim.scale_set, claim.provider, Refusal(kind, "no"), self.now
            )
            self.fleet.hold_full_providers(claim.scale_set, self.now)

    @precondition(lambda self: self.runners)
    @rule(data=st.data(), deleted=st.booleans())
    def runner_leaves(self, data: st.DataObject, deleted: bool) -> None:
        scale_set, provider = self.runners.pop(data.draw(st.integers(0, len(self.runners) - 1)))
        self.fleet.remove_runner(scale_set, provider, leaving=True)
        if deleted:
            self.fleet.machine_deleted(provider, self.now)

    @rule()
    def counts_replaced(self) -> None:
        counted: dict[tuple[str, str], int] = {}
        for pair in self.runners:
            counted[pair] = counted.get(pair, 0) + 1
        self.fleet.set_runners((s, p, n) for (s, p), n in counted.items())

    @rule(data=st.data())
    def reconfigured(self, data: st.DataObject) -> None:
        self.providers = [
            ProviderConfig(p.name, "fake", weight=data.draw(WEIGHTS), max_runners=p.max_runners)
            for p in self.providers
        ]
        placements = st.sampled_from([Placement.SPREAD, Placement.PACK])
        self.scale_sets = [
            ScaleSetConfig(
                s.name,
                s.max_runners,
                s.providers,
                priority=s.priority,
                placement=data.draw(placements),
            )
            for s in self.scale_sets
        ]
        self.fleet.configure(self.providers, self.scale_sets, TIMING)

    @rule(data=st.data(), reachable=st.booleans(), disabled=st.booleans())
    def switched(self, data: st.DataObject, reachable: bool, disabled: bool) -> None:
        provider = data.draw(st.sampled_from(self.providers)).name
        self.fleet.set_reachable(provider, reachable)
        self.fleet.set_disabled(provider, disabled)

    @rule(seconds=st.sampled_from([1.0, 15.0, 61.0, 200.0]))
    def time_passes(self, seconds: float) -> None:
        self.now += seconds

    @invariant()
    def the_kept_order_is_the_full_sorts(self) -> None:
        fleet = self.fleet
        for config in self.scale_sets:
            listed = [entry.name for entry in config.providers]
            tryable = [p for p in listed if fleet.skip_reason(config.name, p, self.now) is None]
            own = {
                p: fleet.runners_of(config.name, p)
                + sum(1 for c in self.claims if (c.scale_set, c.provider) == (config.name, p))
                for p in listed
            }
            weights = {p.name: p.weight for p in self.providers}
            full = order_providers(tryable, config.placement, weights, own)
            counted = fleet.runners_of(config.name) + fleet.creating_of(config.name)
            if counted >= config.max_runners:
                full = []  # the scale set is at its own limit: nothing is tried
            assert list(fleet.candidates(config.name, self.now).order) == full
            for k in range(len(listed) + 2):
                assert fleet.first_tryable(config.name, self.now, k) == full[:k]


TestIndexedOrder = IndexedOrder.TestCase
TestIndexedOrder.settings = settings(max_examples=200, stateful_step_count=30, deadline=None)
