"""Seeded fault simulations of placement; a failure names its seed and replays from it.

The default run is 100 seeds × 1,000 steps (a few seconds of processor time); ``make test-long``
sets RUNGAR_SIM_SEEDS=2000 and RUNGAR_SIM_STEPS=5000.
"""

from __future__ import annotations

import os

import pytest

from rungar.placement import Fleet, Skip
from rungar.placement.fleet import Claim
from rungar.testing.simulation import InvariantBroken, Simulation, run_many, simulate

SEEDS = int(os.environ.get("RUNGAR_SIM_SEEDS", "100"))
STEPS = int(os.environ.get("RUNGAR_SIM_STEPS", "1000"))


@pytest.mark.timeout(1800)  # make test-long: 2,000 seeds × 5,000 steps take minutes
async def test_placement_keeps_every_invariant_across_seeded_fault_scenarios() -> None:
    stats = await run_many(range(SEEDS), STEPS)
    assert stats.steps == SEEDS * STEPS
    # The scenarios really exercise what the invariants guard.
    assert stats.placed > SEEDS
    assert stats.refusals > SEEDS
    assert stats.not_placed > 0
    assert stats.holds_seen > 0


def test_a_seed_replays_to_the_same_run() -> None:
    assert simulate(seed=7, steps=300) == simulate(seed=7, steps=300)


def test_the_simulation_catches_a_limit_that_is_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    def claim_without_limits(
        self: Fleet, scale_set: str, provider: str, now: float, reserve: bool = False
    ) -> Claim:
        return Claim(0, scale_set, provider)

    monkeypatch.setattr(Fleet, "claim", claim_without_limits)
    monkeypatch.setattr(Fleet, "release", lambda self, claim: None)
    with pytest.raises(InvariantBroken, match=r"seed \d+, step \d+"):
        for seed in range(50):
            simulate(seed=seed, steps=500)


def test_the_simulation_catches_a_create_inside_a_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    real_skip_reason = Fleet.skip_reason

    def forgetting_backoffs(
        self: Fleet, scale_set: str, provider: str, now: float, reserve: bool = False
    ) -> str | None:
        reason = real_skip_reason(self, scale_set, provider, now, reserve=reserve)
        return None if reason == "full" or (reason or "").startswith("failing") else reason

    monkeypatch.setattr(Fleet, "skip_reason", forgetting_backoffs)
    with pytest.raises(InvariantBroken, match="inside its backoff"):
        for seed in range(50):
            simulate(seed=seed, steps=500)


def test_the_simulation_catches_a_provider_with_room_passed_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_claim = Fleet.claim

    def claim_only_the_first(
        self: Fleet, scale_set: str, provider: str, now: float, reserve: bool = False
    ) -> Claim | Skip:
        first = self.scale_sets[scale_set].providers[0].name
        if provider != first:
            return Skip(provider, "at its limit of 0 runners")
        return real_claim(self, scale_set, provider, now, reserve=reserve)

    monkeypatch.setattr(Fleet, "claim", claim_only_the_first)
    with pytest.raises(InvariantBroken, match="had room"):
        for seed in range(80):
            simulate(seed=seed, steps=500)


def test_a_broken_invariant_names_the_seed_and_the_steps_to_replay() -> None:
    sim = Simulation(seed=3)
    sim.step = 41
    with pytest.raises(InvariantBroken, match=r"simulate\(seed=3, steps=41\)"):
        sim.fail("example")
