"""A create's start_timeout budget is counted on the engine's injected clock, so a simulation
or a test on virtual time sees the same budget the daemon does on the wall clock."""

from __future__ import annotations

import asyncio
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


async def test_a_create_that_overruns_its_budget_ends_once_with_one_reason_on_the_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = World(tmp_path)
    await world.start()
    asked: list[str] = []
    cancelled: list[str] = []

    async def never_answer(request: CreateRequest) -> Created | Refusal:
        asked.append(request.runner_name)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(request.runner_name)
            raise
        raise AssertionError("unreachable")

    monkeypatch.setattr(world.providers["compute1"], "create", never_answer)
    world.engine.on_demand("linux", 1)
    await world.clock.run_for(59)
    assert len(asked) == 1 and cancelled == [], "within its 60 s the Create is left to run"
    await world.clock.run_for(2)  # past start_timeout, on the injected clock only
    await world.engine.drain_tasks()
    assert cancelled == asked, "the Create was ended once, by the engine"
    ended = world.engine.events.recent(provider="compute1")
    reasons = [e.message for e in ended if e.action in ("failing", "unreachable")]
    assert len(reasons) == 1 and "ran out of time" in reasons[0], reasons
    assert world.on("compute2") == [], "no time is left for the next provider"
    assert len(world.engine.runners) == 0
