"""Hypothesis drives the fleet through any order of claims, outcomes, deletions and time."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from rungar.config.model import ProviderConfig, ScaleSetConfig, ScaleSetProvider, Timing
from rungar.model.machine import Refusal, RefusalKind
from rungar.placement import Fleet, Skip
from rungar.placement.fleet import Claim

PROVIDERS = [
    ProviderConfig("a", "fake", max_runners=2),
    ProviderConfig("b", "fake", weight=2.0, max_runners=3),
    ProviderConfig("c", "fake"),
]
SCALE_SETS = [
    ScaleSetConfig("low", 4, tuple(ScaleSetProvider(p) for p in "abc")),
    ScaleSetConfig("high", 2, tuple(ScaleSetProvider(p) for p in "ab"), priority=10),
    ScaleSetConfig("peer", 3, tuple(ScaleSetProvider(p) for p in "bc"), priority=10),
]
KINDS = st.sampled_from(list(RefusalKind))


class FleetMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.fleet = Fleet(PROVIDERS, SCALE_SETS, Timing(backoff_first=15, backoff_max=120))
        self.now = 0.0
        self.claims: list[Claim] = []
        self.runners: list[tuple[str, str]] = []

    @rule(scale_set=st.sampled_from(["low", "high", "peer"]), index=st.integers(0, 2))
    def claim(self, scale_set: str, index: int) -> None:
        providers = self.fleet.scale_sets[scale_set].providers
        provider = providers[index % len(providers)].name
        reason = self.fleet.skip_reason(scale_set, provider, self.now)
        config = self.fleet.scale_sets[scale_set]
        counted = self.fleet.runners_of(scale_set) + self.fleet.creating_of(scale_set)
        result = self.fleet.claim(scale_set, provider, self.now)
        if counted >= config.max_runners:
            assert isinstance(result, Skip) and result.reason.startswith("the scale set is at")
        elif reason is not None:
            assert isinstance(result, Skip) and result.reason == reason
        else:
            assert isinstance(result, Claim)
        if isinstance(result, Claim):
            self.claims.append(result)

    @precondition(lambda self: self.claims)
    @rule(data=st.data())
    def created(self, data: st.DataObject) -> None:
        claim = self.claims.pop(data.draw(st.integers(0, len(self.claims) - 1)))
        self.fleet.record_created(claim, self.now)
        self.runners.append((claim.scale_set, claim.provider))
        assert self.fleet.backoff(claim.scale_set, claim.provider) is None

    @precondition(lambda self: self.claims)
    @rule(data=st.data(), kind=KINDS)
    def refused(self, data: st.DataObject, kind: RefusalKind) -> None:
        claim = self.claims.pop(data.draw(st.integers(0, len(self.claims) - 1)))
        self.fleet.release(claim)
        self.fleet.record_refusal(claim.scale_set, claim.provider, Refusal(kind, "no"), self.now)
        self.fleet.hold_full_providers(claim.scale_set, self.now)
        backoff = self.fleet.backoff(claim.scale_set, claim.provider)
        assert backoff is not None and backoff.active(self.now)
        assert backoff.full == (kind is RefusalKind.FULL)

    @precondition(lambda self: self.runners)
    @rule(data=st.data())
    def runner_leaves(self, data: st.DataObject) -> None:
        scale_set, provider = self.runners.pop(data.draw(st.integers(0, len(self.runners) - 1)))
        self.fleet.remove_runner(scale_set, provider, leaving=True)
        self.fleet.machine_deleted(provider, self.now) if data.draw(st.booleans()) else None

    @rule(seconds=st.sampled_from([1.0, 15.0, 61.0, 200.0]))
    def time_passes(self, seconds: float) -> None:
        self.now += seconds

    @rule(provider=st.sampled_from(["a", "b", "c"]), reachable=st.booleans())
    def listed(self, provider: str, reachable: bool) -> None:
        self.fleet.set_reachable(provider, reachable)

    @invariant()
    def no_limit_is_exceeded(self) -> None:
        for provider in PROVIDERS:
            if provider.max_runners:
                assert self.fleet.provider_count(provider.name) <= provider.max_runners
        for config in SCALE_SETS:
            counted = self.fleet.runners_of(config.name) + self.fleet.creating_of(config.name)
            assert counted <= config.max_runners

    @invariant()
    def equal_priorities_never_hold_each_other(self) -> None:
        for provider in ("b",):
            hold = self.fleet.hold_on(provider, self.now)
            if hold is not None and hold.holder in ("high", "peer"):
                other = "peer" if hold.holder == "high" else "high"
                reason = self.fleet.skip_reason(other, provider, self.now)
                assert reason is None or not reason.startswith("held")


TestFleetStateMachine = FleetMachine.TestCase
TestFleetStateMachine.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
