"""A provider is trusted only with what it holds, and its answers are checked before they are
believed: another provider's listing never ends, changes or backs off a runner, a listing that
cannot be believed is reported and not acted on, and a Create answered with another machine's
name is a refusal (the engine with two fake providers, one of them lying in its answers).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

from rungar.cli.status import render_status
from rungar.daemon.status import snapshot
from rungar.model import labels as L
from rungar.model.machine import (
    Conclusion,
    Created,
    CreateRequest,
    JobHint,
    Machine,
    MachineState,
    Refusal,
    RefusalKind,
)
from rungar.model.runner import RunnerState
from rungar.testing.fake_github import FakeGitHub
from rungar.testing.fake_provider import FakeProvider
from tests.integration.test_engine_lifecycle import World


def lie(provider: FakeProvider, extra: Callable[[], list[Machine]]) -> None:
    """``provider`` answers List with its own machines and then ``extra()``."""
    original = provider.list

    async def lying(selector: Mapping[str, str]) -> list[Machine]:
        return [*await original(selector), *extra()]

    provider.list = lying  # type: ignore[method-assign]  # the hostile provider's answer


def faults(world: World, kind: str) -> list[tuple[str, str]]:
    return [
        (e.provider, e.attributes["machine"])
        for e in world.engine.events.recent()
        if e.action == "listing_fault" and e.attributes["fault"] == kind
    ]


def without_provider(machine: Machine) -> dict[str, str]:
    return {k: v for k, v in machine.labels.items() if k != L.PROVIDER}


async def world_of(tmp_path: Path, runners: int) -> World:
    world = World(tmp_path)
    await world.start()
    await world.demand(runners)
    return world


async def test_another_providers_stopped_listing_of_a_machine_removes_none_of_its_runners(
    tmp_path: Path,
) -> None:
    world = await world_of(tmp_path, 2)
    held = world.on("compute1")
    assert len(held) == 2
    for name in held:
        world.github.start_runner(name)
    # compute2 names compute1's machines, stopped and without compute1's provider label.
    lie(
        world.providers["compute2"],
        lambda: [
            replace(m, state=MachineState.STOPPED, labels=without_provider(m))
            for m in world.providers["compute1"].machines
        ],
    )
    for _ in range(3):
        await world.engine.reconcile()
        world.clock.advance(30)
    assert world.on("compute1") == held, "none of compute1's machines deleted"
    assert world.providers["compute1"].calls["delete"] == 0
    for name in held:
        record = world.engine.runners.get(name)
        assert record is not None and record.provider == "compute1"
        assert record.state is not RunnerState.LEAVING
        assert record.machine is MachineState.RUNNING, "no state taken from compute2"
    now = world.clock.now()
    assert not world.engine.fleet.active_crash_loops(now), "compute1 not backed off"
    assert not world.engine.fleet.active_backoffs(now)
    assert sorted(faults(world, "held_elsewhere")) == [("compute2", n) for n in held], (
        "reported once per provider and machine, over three passes"
    )
    text = render_status(snapshot(world.engine.ctx))
    assert f"provider compute2 listed machine {held[0]}, which provider compute1 holds: " in text
    assert "ignored" in text


async def test_a_machine_listed_twice_with_different_states_is_not_acted_on(
    tmp_path: Path,
) -> None:
    world = await world_of(tmp_path, 1)
    (name,) = world.on("compute1")
    world.github.start_runner(name)
    compute1 = world.providers["compute1"]
    lie(compute1, lambda: [replace(compute1.machines[0], state=MachineState.STOPPED)])
    await world.engine.reconcile()
    record = world.engine.runners.get(name)
    assert record is not None and record.state is not RunnerState.LEAVING
    assert world.on("compute1") == [name]
    assert faults(world, "listed_twice") == [("compute1", name)]


async def test_a_starting_runner_listed_twice_with_different_states_is_not_ended_between_passes(
    tmp_path: Path,
) -> None:
    world = await world_of(tmp_path, 1)
    (name,) = world.on("compute1")
    compute1 = world.providers["compute1"]
    lie(compute1, lambda: [replace(compute1.machines[0], state=MachineState.STOPPED)])
    record = world.engine.runners.get(name)
    assert record is not None and record.state is RunnerState.STARTING
    # The sync of starting runners, between passes, reads the same listing: a runner that may
    # be taking its job now is not ended on its word.
    await world.engine.starting.sync()
    assert record.state is RunnerState.STARTING
    assert world.on("compute1") == [name]
    assert faults(world, "listed_twice") == [("compute1", name)]


async def test_a_machine_of_another_installation_is_flagged_and_never_adopted(
    tmp_path: Path,
) -> None:
    world = await world_of(tmp_path, 1)
    compute2 = world.providers["compute2"]
    stranger = Machine(
        "linux-stranger",
        MachineState.RUNNING,
        labels=L.machine_labels("gh-other", "linux", "linux-stranger", "r", "compute2"),
    )
    lie(compute2, lambda: [stranger])
    await world.engine.reconcile()
    assert "linux-stranger" not in world.engine.runners
    assert faults(world, "other_installation") == [("compute2", "linux-stranger")]


async def test_an_untracked_machine_two_providers_list_is_adopted_by_the_first_only(
    tmp_path: Path,
) -> None:
    world = await world_of(tmp_path, 0)
    orphan = Machine(
        "linux-orphan",
        MachineState.RUNNING,
        labels=L.machine_labels("gh-test", "linux", "linux-orphan", "r"),
    )
    lie(world.providers["compute1"], lambda: [orphan])
    lie(world.providers["compute2"], lambda: [orphan])
    await world.engine.reconcile()
    adopted = [e.provider for e in world.engine.events.recent() if e.action == "adopted"]
    assert adopted == ["compute1"]
    assert faults(world, "held_elsewhere") == [("compute2", "linux-orphan")]


async def test_a_runner_removed_while_the_listing_was_in_flight_is_not_adopted_again(
    tmp_path: Path,
) -> None:
    world = await world_of(tmp_path, 1)
    (name,) = world.on("compute1")
    world.github.start_runner(name)
    world.engine.on_job_started("linux", "j1", name, JobHint("octo/app", "ci.yml", "build"))
    compute1 = world.providers["compute1"]
    original = compute1.list

    async def slow(selector: Mapping[str, str]) -> list[Machine]:
        listed = await original(selector)  # taken before the job completes...
        world.github.finish_runner(name)
        world.engine.on_job_completed("linux", "j1", name, Conclusion.SUCCEEDED)
        await world.engine.drain_tasks()  # ...which removes the runner and deletes its machine
        return listed

    compute1.list = slow  # type: ignore[method-assign]  # a listing older than the removal
    await world.engine.reconcile()
    assert world.on("compute1") == []
    assert name not in world.engine.runners, "not adopted from the older listing"
    assert not [e for e in world.engine.events.recent() if e.action == "adopted"]


def misnaming(provider: FakeProvider, job_taken_on: FakeGitHub | None = None) -> None:
    """``provider`` makes the machine asked for and another one, and answers with the other;
    with ``job_taken_on``, the registration has taken a job there before the answer."""
    original = provider.create

    async def misnamed(request: CreateRequest) -> Created | Refusal:
        await original(request)
        if job_taken_on is not None:
            job_taken_on.start_runner(request.runner_name, busy=True)
        other = replace(request, runner_name="linux-evil", request_id="other")
        made = provider.create_now(other, provider._clock.now())
        assert isinstance(made, Created)
        return Created(replace(made.machine, name="linux-evil"))

    provider.create = misnamed  # type: ignore[method-assign]  # the hostile provider's answer


async def test_a_create_answered_with_another_machines_name_is_a_failed_refusal(
    tmp_path: Path,
) -> None:
    world = await world_of(tmp_path, 0)
    misnaming(world.providers["compute1"])
    await world.demand(1)
    assert world.on("compute1") == [], "both the asked-for and the named machine deleted"
    (failing,) = [e for e in world.engine.events.recent() if e.action == "failing"]
    assert failing.provider == "compute1"
    assert "answered with machine linux-evil for " in failing.message
    # Its registration may run on a machine Rungar does not know: handed to no other provider.
    assert world.on("compute2") == [] and world.github.runners == {}, "its registration removed"
    await world.demand(1)  # the next runner, registered afresh, goes where it is believed
    (name,) = world.on("compute2")
    assert set(world.engine.runners.names()) == {name}, "placed on compute2, nothing adopted"
    assert name not in failing.message
    await world.engine.reconcile()
    assert "linux-evil" not in world.engine.runners


async def test_a_misnamed_create_with_nowhere_else_to_go_leaves_no_registration(
    tmp_path: Path,
) -> None:
    world = await world_of(tmp_path, 0)
    misnaming(world.providers["compute1"])
    world.providers["compute2"].refuse(RefusalKind.FULL, always=True, resource="memory")
    await world.demand(1)
    assert world.on("compute1") == [] and world.on("compute2") == []
    assert world.github.runners == {}, "its registration removed"
    world.clock.advance(120)
    await world.engine.reconcile()
    assert len(world.engine.runners) == 0, "nothing adopted"


async def test_a_misnamed_create_whose_registration_took_a_job_keeps_both_machines_until_it_ends(
    tmp_path: Path,
) -> None:
    world = await world_of(tmp_path, 0)
    misnaming(world.providers["compute1"], job_taken_on=world.github)
    await world.demand(1)
    (asked,) = [name for name in world.on("compute1") if name != "linux-evil"]
    # Its job may run on either machine: neither is deleted, neither adopted, the registration
    # stays (GitHub refuses to remove a busy runner) and goes to no other provider.
    assert world.on("compute1") == sorted([asked, "linux-evil"]), "a machine deleted mid-job"
    assert world.on("compute2") == []
    (failing,) = [e for e in world.engine.events.recent() if e.action == "failing"]
    assert f"answered with machine linux-evil for {asked}" in failing.message
    world.clock.advance(5)
    await world.engine.reconcile()
    assert world.on("compute1") == sorted([asked, "linux-evil"]), "deleted while still busy"
    assert len(world.engine.runners) == 0, "nothing adopted"
    world.github.finish_runner(asked)  # its job ended: the ephemeral registration is gone
    world.clock.advance(5)
    await world.engine.reconcile()
    assert world.on("compute1") == [], "both deleted once the job ended"
    assert len(world.engine.runners) == 0
    left = {e.name for e in world.engine.events.recent() if e.action == "left_behind"}
    assert left == {asked, "linux-evil"}


async def test_a_list_that_times_out_says_what_timed_out_and_after_how_long(
    tmp_path: Path,
) -> None:
    world = await world_of(tmp_path, 0)

    async def hangs(selector: Mapping[str, str]) -> list[Machine]:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    world.providers["compute2"].list = hangs  # type: ignore[method-assign]  # never answers
    world.cfg = replace(world.cfg, timing=replace(world.cfg.timing, provider_timeout=0.1))
    world.engine = world.new_engine()
    await world.start()
    await world.engine.reconcile()
    [event] = [e for e in world.engine.events.recent() if e.action == "unreachable"]
    assert (event.provider, event.message) == ("compute2", "List timed out after 0.1 s")
    text = render_status(snapshot(world.engine.ctx))
    assert "List timed out after 0.1 s" in text
