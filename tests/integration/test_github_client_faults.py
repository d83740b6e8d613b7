"""The scale-set client against the emulator over real HTTP, one injected fault at a time."""

from __future__ import annotations

import asyncio

import jwt
import pytest
from structlog.testing import capture_logs

from rungar.errors import GitHubError
from rungar.github.auth import AppAuth
from rungar.github.interface import RemoveOutcome
from rungar.testing.github_emulator import Fault, FaultKind, InstantClock, JobSpec
from rungar.testing.github_emulator.harness import emulator, github, scale_set
from tests.github_app import app_keys


async def test_a_cold_start_with_an_app_walks_the_whole_auth_chain_then_creates_the_scale_set() -> (
    None
):
    private, public = app_keys()
    async with (
        emulator(apps={"Iv1.rungar": public}, runner_groups={1: "Default", 7: "ci"}) as emu,
        github(emu, AppAuth("Iv1.rungar", 1, private)) as gh,
    ):
        scale_set_id = await gh.ensure_scale_set(scale_set(runner_group="ci"))
        session = await gh.client.create_session(scale_set_id, "host-1")
    routes = [r["route"] for r in emu.state.requests]
    assert routes == ["R1", "R2", "R3", "A1", "A2", "A5", "A8"]
    app_jwt = emu.state.requests[0]["headers"]["authorization"].removeprefix("Bearer ")
    claims = jwt.decode(app_jwt, options={"verify_signature": False})
    assert claims["iss"] == "Iv1.rungar"
    assert claims["exp"] - claims["iat"] == 540
    assert emu.state.requests[2]["headers"]["authorization"].startswith("RemoteAuth ")
    assert all(
        "api-version" in r["query"] for r in emu.state.requests if r["route"].startswith("A")
    )
    assert emu.state.scale_sets[scale_set_id].runner_group_id == 7
    assert emu.state.scale_sets[scale_set_id].labels == ["linux", "rungar"]
    assert session.statistics is not None and session.statistics.assigned == 0


async def test_an_existing_scale_set_with_other_labels_is_kept_and_warned_about() -> None:
    async with emulator(single_label=True) as emu, github(emu) as gh:
        first = await gh.ensure_scale_set(scale_set(labels=("gpu",)))
        with capture_logs() as logs:
            again = await gh.ensure_scale_set(scale_set(labels=("gpu",)))
    assert first == again
    warning = [e for e in logs if e["event"] == "github.scale_set_labels_differ"]
    assert warning and warning[0]["missing_on_github"] == ["gpu"]
    assert sum(1 for r in emu.state.requests if r["route"] == "A5") == 1


async def test_a_401_from_the_admin_service_reruns_the_chain_and_retries_once() -> None:
    async with emulator() as emu, github(emu) as gh:
        await gh.ensure_scale_set(scale_set())
        emu.state.faults.add(Fault("A2", status=401))
        await gh.ensure_scale_set(scale_set())
    routes = [r["route"] for r in emu.state.requests]
    assert routes.count("R3") == 2  # the whole chain ran again after the 401
    assert gh.counter.snapshot()["401"] == 1


async def test_a_second_401_in_a_row_is_an_error_not_a_loop() -> None:
    async with emulator() as emu, github(emu) as gh:
        await gh.ensure_scale_set(scale_set())
        emu.state.faults.add(Fault("A2", status=401, count=2))
        with pytest.raises(GitHubError) as caught:
            await gh.ensure_scale_set(scale_set())
    assert caught.value.status == 401


async def test_registration_refused_with_403_is_retried_until_it_succeeds() -> None:
    clock = InstantClock()
    async with emulator() as emu, github(emu, clock=clock) as gh:
        emu.state.faults.add(Fault("R3", status=403, count=2))
        assert await gh.ensure_scale_set(scale_set()) > 0
    assert [r["route"] for r in emu.state.requests].count("R3") == 3


async def test_5xx_bursts_are_retried_honouring_retry_after() -> None:
    clock = InstantClock()
    async with emulator() as emu, github(emu, clock=clock) as gh:
        scale_set_id = await gh.ensure_scale_set(scale_set())
        emu.state.faults.add(Fault("A13", status=503, count=3, headers={"Retry-After": "7"}))
        runner_id, jit = await gh.generate_jit_config(scale_set_id, "linux-1")
    assert runner_id in emu.state.runners and jit
    assert clock.sleeps.count(7.0) == 3
    assert gh.counter.snapshot()["503"] == 3
    assert emu.state.runners_created == 1  # retries created no surplus registration


async def test_a_501_is_not_retried() -> None:
    async with emulator() as emu, github(emu) as gh:
        scale_set_id = await gh.ensure_scale_set(scale_set())
        emu.state.faults.add(Fault("A13", status=501, count=5))
        with pytest.raises(GitHubError) as caught:
            await gh.generate_jit_config(scale_set_id, "linux-1")
    assert caught.value.status == 501
    assert gh.counter.snapshot()["501"] == 1


async def test_persistent_5xx_gives_up_after_four_retries_with_exponential_waits() -> None:
    clock = InstantClock()
    async with emulator() as emu, github(emu, clock=clock) as gh:
        scale_set_id = await gh.ensure_scale_set(scale_set())
        emu.state.faults.add(Fault("A13", status=500, count=10))
        with pytest.raises(GitHubError):
            await gh.generate_jit_config(scale_set_id, "linux-1")
    assert gh.counter.snapshot()["500"] == 5
    assert clock.sleeps == [1.0, 2.0, 4.0, 8.0]


async def test_a_secondary_rate_limit_is_waited_out_for_its_retry_after() -> None:
    clock = InstantClock()
    async with emulator() as emu, github(emu, clock=clock) as gh:
        emu.state.faults.add(
            Fault(
                "R2",
                status=403,
                message="You have exceeded a secondary rate limit",
                headers={"retry-after": "42"},
            )
        )
        await gh.ensure_scale_set(scale_set())
    assert 42.0 in clock.sleeps


async def test_a_spent_budget_waits_for_the_reset_before_the_next_rest_call() -> None:
    async with emulator() as emu:
        clock = InstantClock(on_sleep=emu.clock.advance)  # the wait really passes, for the emulator
        async with github(emu, clock=clock) as gh:
            emu.state.rate_remaining = 1
            emu.state.rate_reset = emu.clock.now() + 120
            assert await gh.ensure_scale_set(scale_set()) > 0  # R2 spent the last call; R3 waited
    waits = [s for s in clock.sleeps if s > 60]
    assert len(waits) == 1 and 100 < waits[0] <= 121
    assert [r["route"] for r in emu.state.requests][:3] == ["R2", "R3", "A2"]


async def test_jit_name_collision_removes_the_stale_registration_and_retries() -> None:
    async with emulator() as emu, github(emu) as gh:
        scale_set_id = await gh.ensure_scale_set(scale_set())
        stale_id, _ = await gh.generate_jit_config(scale_set_id, "linux-1")
        runner_id, _ = await gh.generate_jit_config(scale_set_id, "linux-1")
    assert runner_id != stale_id
    assert list(emu.state.runners) == [runner_id]
    routes = [r["route"] for r in emu.state.requests]
    assert routes[-4:] == ["A13", "A15", "A17", "A13"]


async def test_a_busy_runner_is_not_removed_and_a_gone_one_is_fine() -> None:
    async with emulator() as emu, github(emu) as gh:
        scale_set_id = await gh.ensure_scale_set(scale_set())
        session = await gh.client.create_session(scale_set_id, "host")
        await gh.client.get_message(session, 0, 5)  # capacity known: jobs may be assigned
        emu.state.queue_job(JobSpec(labels=("self-hosted", "rungar")))
        runner_id, _ = await gh.generate_jit_config(scale_set_id, "linux-1")
        runner = emu.state.runners[runner_id]
        emu.state.connect(runner)
        assert emu.state.take_job(runner) is not None
        assert await gh.remove_runner(runner_id) is RemoveOutcome.BUSY
        idle_id, _ = await gh.generate_jit_config(scale_set_id, "linux-2")
        assert await gh.remove_runner(idle_id) is RemoveOutcome.REMOVED
        assert await gh.remove_runner(idle_id) is RemoveOutcome.REMOVED
    assert runner_id in emu.state.runners and idle_id not in emu.state.runners


async def test_runners_are_listed_per_scale_set_with_their_status() -> None:
    async with emulator() as emu, github(emu) as gh:
        a = await gh.ensure_scale_set(scale_set("a"))
        b = await gh.ensure_scale_set(scale_set("b"))
        ra, _ = await gh.generate_jit_config(a, "a-1")
        await gh.generate_jit_config(b, "b-1")
        emu.state.connect(emu.state.runners[ra])
        listed = await gh.list_runners(a)
        by_name = await gh.get_runner_by_name("b-1")
    assert [(r.name, r.online, r.busy) for r in listed] == [("a-1", True, False)]
    assert by_name is not None and by_name.scale_set_id == b and not by_name.online


async def test_a_bom_before_the_json_is_stripped() -> None:
    async with emulator() as emu, github(emu) as gh:
        emu.state.faults.add(Fault("A5", kind=FaultKind.BOM))
        assert await gh.ensure_scale_set(scale_set()) > 0


async def test_the_rest_jit_config_of_webhook_pools_needs_labels_and_a_group() -> None:
    async with emulator() as emu, github(emu) as gh:
        jit = await gh.client.generate_rest_jit_config("pool-1", 1, ["self-hosted", "linux"])
    assert jit.runner.name == "pool-1" and jit.encoded
    assert emu.state.requests[-1]["route"] == "R4"


async def test_every_scale_set_shares_one_runner_listing_for_its_max_age() -> None:
    async with emulator() as emu, github(emu) as gh:
        a = await gh.ensure_scale_set(scale_set("a"))
        b = await gh.ensure_scale_set(scale_set("b"))
        await gh.generate_jit_config(a, "a-1")
        await gh.generate_jit_config(b, "b-1")
        before = len(emu.state.requests)
        # Two scale sets and a reconcile pass asking at once: one request to GitHub.
        listed = await asyncio.gather(gh.list_runners(a), gh.list_runners(b), gh.list_all_runners())
        await gh.list_all_runners()  # and again within 15 s: no request at all
        lists = [r for r in emu.state.requests[before:] if r["path"].endswith("/agents")]
    assert len(lists) == 1, emu.state.requests[before:]
    assert [r.name for r in listed[0]] == ["a-1"] and [r.name for r in listed[1]] == ["b-1"]
    assert sorted(r.name for r in listed[2]) == ["a-1", "b-1"]
