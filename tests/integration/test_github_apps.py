"""Several GitHub Apps against the emulator (docs/github.md, "More than one App";
docs/github-emulator.md): each App installation has a registration limit of its own, Rungar's
client registers through the App it is told, and a revoked or suspended App is refused while
the others go on."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from rungar.errors import GitHubError
from rungar.github.auth import AppAuth
from rungar.github.exceptions import RegistrationThrottled
from rungar.github.service import ScaleSetGitHub
from rungar.testing.github_emulator import GitHubEmulator
from rungar.testing.github_emulator.harness import emulator, github, scale_set
from tests.github_app import app_keys

KEYS = {name: app_keys() for name in ("Iv1.first", "Iv1.second")}
INSTALLATIONS = {"Iv1.first": 1, "Iv1.second": 2}


def auths() -> list[AppAuth]:
    return [AppAuth(app, INSTALLATIONS[app], private) for app, (private, _) in KEYS.items()]


@pytest.fixture
async def emu() -> AsyncIterator[GitHubEmulator]:
    async with emulator(
        apps={app: public for app, (_, public) in KEYS.items()},
        installations={1: "octo-org", 2: "octo-org"},
        jit_rate_per_minute=2,
    ) as emu:
        yield emu


@pytest.fixture
async def gh(emu: GitHubEmulator) -> AsyncIterator[ScaleSetGitHub]:
    first, *more = auths()
    async with github(emu, first, more_apps=more) as gh:
        yield gh


async def test_each_installation_is_throttled_on_its_own(
    emu: GitHubEmulator, gh: ScaleSetGitHub
) -> None:
    scale_set_id = await gh.ensure_scale_set(scale_set())
    for n in range(2):
        await gh.generate_jit_config(scale_set_id, f"first-{n}", app=0)
    with pytest.raises(RegistrationThrottled):
        await gh.generate_jit_config(scale_set_id, "first-2", app=0)
    # The second App's installation has a limit of its own, untouched by the first's.
    for n in range(2):
        await gh.generate_jit_config(scale_set_id, f"second-{n}", app=1)
    with pytest.raises(RegistrationThrottled):
        await gh.generate_jit_config(scale_set_id, "second-2", app=1)
    throttle = emu.state.faults.throttles["A13"]
    assert throttle.passed_by == {"installation:1": 2, "installation:2": 2}
    assert throttle.refused_by == {"installation:1": 1, "installation:2": 1}


async def test_a_revoked_app_is_refused_and_the_other_registers_on(
    emu: GitHubEmulator, gh: ScaleSetGitHub
) -> None:
    scale_set_id = await gh.ensure_scale_set(scale_set())
    await gh.generate_jit_config(scale_set_id, "before", app=1)  # its chain is cached now
    async with httpx.AsyncClient() as http:
        answer = await http.post(f"{emu.base_url}/_fake/apps/Iv1.second/revoke")
        assert answer.status_code == 204
    with pytest.raises(GitHubError) as caught:
        await gh.generate_jit_config(scale_set_id, "after", app=1)
    assert caught.value.status == 401
    await gh.generate_jit_config(scale_set_id, "other", app=0)
    names = {r.name for r in emu.state.runners.values()}
    assert {"before", "other"} <= names and "after" not in names


async def test_a_suspended_installation_answers_403_for_its_token(emu: GitHubEmulator) -> None:
    async with httpx.AsyncClient() as http:
        answer = await http.post(f"{emu.base_url}/_fake/installations/2/suspend")
        assert answer.status_code == 204
    first, second = auths()
    async with github(emu, second) as gh:
        with pytest.raises(GitHubError) as caught:
            await gh.ensure_scale_set(scale_set())
    assert caught.value.status == 403
    assert "suspended" in str(caught.value)
    async with github(emu, first) as gh:
        await gh.ensure_scale_set(scale_set())  # the other installation is not touched
