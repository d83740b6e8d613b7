"""A create's start_timeout budget is counted on the engine's injected clock, so a simulation
or a test on virtual time sees the same budget the daemon does on the wall clock."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from rungar.github.exceptions import RegistrationThrottled
from rungar.model.machine import Created, CreateRequest, Refusal, RefusalKind
from rungar.scaling import registration_pace as rp
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


async def test_a_registration_throttled_past_start_timeout_blames_no_provider(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GitHub answers the first registration 429, Retry-After 90 s: longer than start_timeout.
    world = World(tmp_path)
    await world.start()
    world.github.fail_next(
        "generate_jit_config", RegistrationThrottled("throttled", 429, retry_after=90)
    )
    budgets: list[float | None] = []
    create = world.providers["compute1"].create

    async def record_budget(request: CreateRequest) -> Created | Refusal:
        budgets.append(request.budget)
        return await create(request)

    monkeypatch.setattr(world.providers["compute1"], "create", record_budget)
    world.engine.on_demand("linux", 1)
    await world.clock.run_for(100)
    await world.engine.drain_tasks()
    assert budgets == [60.0], "start_timeout counts from the registration, not before its wait"
    assert len(world.on("compute1")) == 1
    blamed = [e for e in world.engine.events.recent() if e.action in ("failing", "unreachable")]
    assert blamed == []
    assert world.engine.ctx.fleet.active_backoffs(world.clock.now()) == []


async def test_a_queued_create_no_longer_wanted_is_dropped_before_it_registers(
    tmp_path: Path,
) -> None:
    world = World(tmp_path)
    await world.start()
    # GitHub's pace learned: one registration every 10 s from now.
    world.engine.ctx.registrations.pace = replace(rp.start(configured=6), next_at=world.clock.now())
    world.engine.on_demand("linux", 4)
    await world.clock.run_for(1)
    assert len(world.engine.runners) == 1, "one registered at once; three wait their turn"
    world.engine.on_demand("linux", 0)  # the jobs went elsewhere or were cancelled
    await world.clock.run_for(60)
    await world.engine.drain_tasks()
    jit = [c for c in world.github.calls if c[0] == "generate_jit_config"]
    assert len(jit) == 1, "no registration spent after desired reached 0"
    assert world.engine.ctx.registrations.view().waiting == 0
    assert world.engine.ctx.runners.creating.count("linux") == 0
