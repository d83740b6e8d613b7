"""Settling an unanswered create by asking again with the same key."""

from __future__ import annotations

import pytest

from rungar.errors import ProviderUnavailable
from rungar.model.machine import Created, CreateRequest, Refusal, RefusalKind
from rungar.model.runner_block import RunnerBlock
from rungar.rpc.settle import Unsettled, settle_unanswered_create
from rungar.testing.clock import JumpingClock
from rungar.testing.fake_provider import GIB, FakeProvider


def request(key: str = "key-1") -> CreateRequest:
    return CreateRequest("linux-1", key, "linux", {}, RunnerBlock(2, 2 * GIB), "jit")


async def test_an_uncertain_create_settles_to_the_machine_it_made() -> None:
    clock = JumpingClock(1000.0)
    fake = FakeProvider(clock=clock)
    fake.unanswered(after_create=True)
    with pytest.raises(ProviderUnavailable):
        fake.create_now(request(), clock.now())
    outcome = await settle_unanswered_create(fake, request(), clock)
    assert isinstance(outcome, Created) and outcome.machine.name == "linux-1"
    assert fake.created == 1  # asked again, created nothing more
    assert clock.slept == [1.0]


async def test_a_create_that_never_happened_is_made_on_the_retry() -> None:
    clock = JumpingClock(1000.0)
    fake = FakeProvider(clock=clock)
    fake.unanswered(count=2)  # the lost call and the first retry
    with pytest.raises(ProviderUnavailable):
        fake.create_now(request(), clock.now())
    outcome = await settle_unanswered_create(fake, request(), clock)
    assert isinstance(outcome, Created)
    assert fake.created == 1
    assert clock.slept == [1.0, 2.0]


async def test_a_provider_that_stays_silent_leaves_the_outcome_unsettled() -> None:
    clock = JumpingClock(1000.0)
    fake = FakeProvider(clock=clock)
    fake.unanswered(always=True, after_create=True)
    outcome = await settle_unanswered_create(fake, request(), clock, tries=3, first_delay=0.5)
    assert isinstance(outcome, Unsettled)
    assert outcome.runner_name == "linux-1" and outcome.tries == 3
    assert "still unanswered after 3 retries" in outcome.message
    assert clock.slept == [0.5, 1.0, 2.0]
    assert [m.name for m in fake.machines] == ["linux-1"]  # the leftover the caller must delete


async def test_a_refusal_on_the_retry_is_a_settled_answer() -> None:
    clock = JumpingClock(1000.0)
    fake = FakeProvider(clock=clock)
    fake.refuse(RefusalKind.FULL, resource="memory", message="needs 2G, 1G free")
    outcome = await settle_unanswered_create(fake, request(), clock)
    assert outcome == Refusal(RefusalKind.FULL, "needs 2G, 1G free", "memory")
