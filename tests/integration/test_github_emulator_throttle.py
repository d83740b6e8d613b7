"""The emulator's registration throttle (docs/github-emulator.md): the JIT route is let through
``rate`` times in any minute and answers 429 with Retry-After past it; Rungar's client reads
that as GitHub's registration limit, not as an error to wait out in the transport."""

from __future__ import annotations

import httpx
import pytest

from rungar.github.exceptions import RegistrationThrottled
from rungar.testing.github_emulator.harness import emulator, github, scale_set


async def test_past_the_rate_the_jit_route_answers_429_with_retry_after() -> None:
    async with emulator(jit_rate_per_minute=3) as emu, github(emu) as gh:
        scale_set_id = await gh.ensure_scale_set(scale_set())
        for n in range(3):
            await gh.generate_jit_config(scale_set_id, f"runner-{n}")
        with pytest.raises(RegistrationThrottled) as caught:
            await gh.generate_jit_config(scale_set_id, "runner-3")
        assert caught.value.status == 429
        assert 1 <= caught.value.retry_after <= 60
        assert emu.state.faults.throttles["A13"].refused == 1
        emu.state.clock.advance(60)  # the window slides: the route lets calls through again
        await gh.generate_jit_config(scale_set_id, "runner-3")


async def test_a_throttle_fault_is_set_and_lifted_through_the_control_api() -> None:
    async with emulator() as emu, github(emu) as gh:
        scale_set_id = await gh.ensure_scale_set(scale_set())
        async with httpx.AsyncClient() as http:
            fault = {"route": "A13", "kind": "throttle", "rate": 1}
            assert (await http.post(f"{emu.base_url}/_fake/faults", json=fault)).status_code == 204
            await gh.generate_jit_config(scale_set_id, "runner-0")
            with pytest.raises(RegistrationThrottled):
                await gh.generate_jit_config(scale_set_id, "runner-1")
            state = (await http.get(f"{emu.base_url}/_fake/state")).json()
            assert state["throttled"] == {"A13": 1}
            lifted = {"route": "A13", "kind": "throttle", "rate": 0}
            assert (await http.post(f"{emu.base_url}/_fake/faults", json=lifted)).status_code == 204
        await gh.generate_jit_config(scale_set_id, "runner-1")
