"""The scripted fake provider's sync core: room, refusals, idempotency and scripted faults."""

from __future__ import annotations

import random

import pytest

from rungar.errors import ProviderError, ProviderUnavailable
from rungar.model.machine import Created, CreateRequest, MachineState, Refusal, RefusalKind
from rungar.model.runner_block import RunnerBlock
from rungar.testing.fake_provider import GIB, FakeProvider


def request(name: str, key: str = "", vcpus: float = 2, memory: int = 2 * GIB) -> CreateRequest:
    labels = {"rungar.sh/managed": "true", "rungar.sh/runner": name}
    return CreateRequest(name, key or f"k-{name}", "s", labels, RunnerBlock(vcpus, memory), "j")


def test_a_repeat_with_the_same_key_returns_the_same_machine_and_creates_one() -> None:
    fake = FakeProvider()
    first = fake.create_now(request("a"), 10.0)
    again = fake.create_now(request("a"), 20.0)
    assert isinstance(first, Created) and first == again
    assert first.machine.created_at == 10.0
    assert fake.created == 1 and fake.calls["create"] == 2


def test_the_same_name_with_another_key_is_refused_failed() -> None:
    fake = FakeProvider()
    fake.create_now(request("a", "k1"), 0)
    outcome = fake.create_now(request("a", "k2"), 0)
    assert isinstance(outcome, Refusal) and outcome.kind is RefusalKind.FAILED
    assert "already exists" in outcome.message


@pytest.mark.parametrize(
    ("vcpus", "memory", "resource", "message"),
    [
        (2, 8 * GIB, "memory", "needs 8G of memory, 6G free"),
        (8, 1 * GIB, "cpu", "needs 8 vCPUs, 6 free"),
    ],
)
def test_out_of_room_is_refused_full_naming_the_resource(
    vcpus: float, memory: int, resource: str, message: str
) -> None:
    fake = FakeProvider(vcpus=8, memory_bytes=8 * GIB)
    fake.create_now(request("a"), 0)
    outcome = fake.create_now(request("b", vcpus=vcpus, memory=memory), 0)
    assert outcome == Refusal(RefusalKind.FULL, message, resource)


def test_a_runner_larger_than_the_provider_is_refused_invalid() -> None:
    fake = FakeProvider(vcpus=4, memory_bytes=8 * GIB)
    outcome = fake.create_now(request("a", vcpus=16), 0)
    assert outcome == Refusal(RefusalKind.INVALID, "needs 16 vCPUs, more than the 4 of fake")


def test_a_maximum_count_refuses_full_slots() -> None:
    fake = FakeProvider(max_machines=1)
    fake.create_now(request("a"), 0)
    outcome = fake.create_now(request("b"), 0)
    assert isinstance(outcome, Refusal) and (outcome.kind, outcome.resource) == (
        RefusalKind.FULL,
        "slots",
    )


def test_stopped_and_deleted_machines_free_their_room() -> None:
    fake = FakeProvider(vcpus=2, memory_bytes=2 * GIB)
    fake.create_now(request("a"), 0)
    assert isinstance(fake.create_now(request("b"), 0), Refusal)
    fake.set_state("a", MachineState.STOPPED)
    assert isinstance(fake.create_now(request("b"), 0), Created)
    fake.delete_now("a")
    fake.delete_now("never-was")
    assert [m.name for m in fake.list_now({})] == ["b"]


def test_the_room_kept_as_machines_change_matches_a_count_of_the_machines() -> None:
    rng = random.Random(7)
    fake = FakeProvider(vcpus=16, memory_bytes=16 * GIB)
    for step in range(400):
        name = f"r{rng.randrange(12)}"
        action = rng.randrange(5)
        if action == 0:
            fake.create_now(request(name, key=f"k{step}"), step)
        elif action == 1:
            fake.refuse(RefusalKind.FAILED, leave_machine=True)  # held, stopped
            fake.create_now(request(name, key=f"k{step}"), step)
        elif action == 2 and name in {m.name for m in fake.machines}:
            fake.set_state(name, rng.choice(list(MachineState)))
        elif action == 3:
            fake.delete_now(name)
        else:
            fake.create_now(request(name), step)  # a repeat of the same key, when held
        live = sum(1 for m in fake.machines if m.state is not MachineState.STOPPED)
        assert (fake.live, fake.used()) == (live, (2.0 * live, 2 * GIB * live)), step
    assert fake.live > 0 and any(m.state is MachineState.STOPPED for m in fake.machines)


def test_scripted_refusals_apply_to_the_next_n_creates_then_stop() -> None:
    fake = FakeProvider()
    fake.refuse(RefusalKind.FULL, count=2, resource="stock", message="zone out of stock")
    outcomes = [fake.create_now(request(f"r{i}"), 0) for i in range(3)]
    assert [type(o).__name__ for o in outcomes] == ["Refusal", "Refusal", "Created"]
    assert outcomes[0] == Refusal(RefusalKind.FULL, "zone out of stock", "stock")


def test_refusing_always_lasts_until_healed() -> None:
    fake = FakeProvider()
    fake.refuse(RefusalKind.INVALID, always=True)
    assert all(isinstance(fake.create_now(request(f"r{i}"), 0), Refusal) for i in range(5))
    fake.heal()
    assert isinstance(fake.create_now(request("ok"), 0), Created)


def test_an_unanswered_create_makes_nothing_unless_scripted_after_the_create() -> None:
    fake = FakeProvider()
    fake.unanswered()
    with pytest.raises(ProviderUnavailable):
        fake.create_now(request("a"), 0)
    assert fake.machines == []
    fake.unanswered(after_create=True)
    with pytest.raises(ProviderUnavailable):
        fake.create_now(request("b"), 0)
    assert [m.name for m in fake.machines] == ["b"]


def test_failing_deletes_and_lists() -> None:
    fake = FakeProvider()
    fake.create_now(request("a"), 0)
    fake.fail_deletes()
    with pytest.raises(ProviderError) as caught:
        fake.delete_now("a")
    assert not isinstance(caught.value, ProviderUnavailable)
    fake.fail_deletes(unanswered=True)
    with pytest.raises(ProviderUnavailable):
        fake.delete_now("a")
    fake.fail_lists(count=1)
    with pytest.raises(ProviderUnavailable):
        fake.list_now({})
    assert [m.name for m in fake.list_now({})] == ["a"]
    fake.delete_now("a")
    assert fake.machines == []


def test_list_filters_by_every_selector_pair() -> None:
    fake = FakeProvider()
    fake.create_now(request("a"), 0)
    fake.create_now(request("b"), 0)
    assert [m.name for m in fake.list_now({"rungar.sh/runner": "b"})] == ["b"]
    assert fake.list_now({"rungar.sh/managed": "true", "rungar.sh/runner": "c"}) == []


async def test_the_async_methods_wait_the_scripted_latency_on_the_clock() -> None:
    class Clock:
        t = 0.0

        def now(self) -> float:
            return self.t

        async def sleep(self, seconds: float) -> None:
            self.t += seconds

    clock = Clock()
    fake = FakeProvider(clock=clock)
    fake.latency = 2.5
    outcome = await fake.create(request("a"))
    assert isinstance(outcome, Created) and outcome.machine.created_at == 2.5
    assert clock.t == 2.5
