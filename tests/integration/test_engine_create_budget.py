"""A create's start_timeout budget is counted on the engine's injected clock, so a simulation
or a test on virtual time sees the same budget the daemon does on the wall clock."""

from __future__ import annotations

from pathlib import Path

import pytest

from rungar.model.machine import Created, CreateRequest, Refusal, RefusalKind
from tests.integration.test_engine_lifecycle import World


async def test_time_spent_on_a_refusing_provider_counts_against_start_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = World(tmp_path)
    await world.start()
    slow = world.providers["compute1"]
    budgets: list[float | None] = []

    async def refuse_after_a_minute(request: CreateRequest) -> Created | Refusal:
        budgets.append(request.budget)
        world.clock.advance(61)  # start_timeout is 60 s: this refusal took all of it
        return Refusal(RefusalKind.FULL, "no room", "memory")

    monkeypatch.setattr(slow, "create", refuse_after_a_minute)
    await world.demand(1)
    assert budgets == [60.0], "the first provider is given the whole start_timeout"
    # With the budget read from the wall clock instead, compute2 was asked and created it.
    assert world.on("compute2") == [], "no time is left for the next provider"
    assert len(world.engine.runners) == 0
