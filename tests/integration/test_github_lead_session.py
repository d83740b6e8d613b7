"""GitHub's one-session-per-scale-set rule, which the standby's lease rests on, against the
emulator over HTTP: a second session create gets GitHub's 409 naming the holder; the
listener that waits says who holds it; a renewal confirms the session held and reports one
GitHub has dropped."""

from __future__ import annotations

import pytest

from rungar.github.client import session_holder
from rungar.github.exceptions import SessionConflict
from rungar.model.phase import Phase
from rungar.testing.github_emulator.harness import (
    Recorder,
    emulator,
    eventually,
    github,
    running_listener,
    scale_set,
)


async def test_a_second_session_on_a_scale_set_gets_409_naming_the_holder() -> None:
    async with emulator() as emu, github(emu) as gh:
        scale_set_id = await gh.ensure_scale_set(scale_set())
        await gh.client.create_session(scale_set_id, "host-a/101")
        with pytest.raises(SessionConflict) as refused:
            await gh.client.create_session(scale_set_id, "host-b/202")
        live = emu.state.live_session(scale_set_id)
    assert refused.value.status == 409
    assert refused.value.holder == "host-a/101"
    assert live is not None and live.owner == "host-a/101", "the first session still holds it"
    assert len(emu.state.sessions) == 1, "the refused create opened no session"


async def test_a_waiting_listener_names_the_session_owner_github_gave() -> None:
    rec = Recorder()
    async with emulator(session_idle_ttl=60.0) as emu, github(emu) as gh:
        scale_set_id = await gh.ensure_scale_set(scale_set())
        await gh.client.create_session(scale_set_id, "host-a/101")
        assert await gh.renew_session("linux") is False, "no listener of its own: nothing held"
        async with running_listener(gh, scale_set(), rec, owner="host-b/202") as lis:
            await eventually(lambda: lis.phase.phase is Phase.WAITING, what="a 409")
            assert lis.phase.holder == "host-a/101"
            assert lis.phase.holder_seen_at > 0
            assert lis.session is not None
            assert await lis.session.renew() is False, "a waiting listener holds nothing"


async def test_a_renewal_confirms_the_session_held_and_reports_an_evicted_one() -> None:
    rec = Recorder()
    async with (
        emulator() as emu,
        github(emu) as gh,
        running_listener(gh, scale_set(), rec, owner="host-a/101") as lis,
    ):
        await eventually(lambda: bool(rec.demands), what="the session")
        assert lis.session is not None
        assert await lis.session.renew() is True
        emu.state.evict_session(lis.scale_set_id)
        assert await lis.session.renew() is False
    assert {s.owner for s in emu.state.sessions.values()} >= {"host-a/101"}


@pytest.mark.parametrize(
    ("message", "holder"),
    [
        (
            "GitHub.Actions.Runtime.WebApi.RunnerScaleSetSessionConflictException: The runner "
            "scale set linux already has an active session for owner ci-a/4242.",
            "ci-a/4242",
        ),
        ("The runner scale set 7 already has an active session for owner .", ""),
        ("conflict", ""),
    ],
)
def test_the_holder_is_read_from_githubs_conflict_message(message: str, holder: str) -> None:
    assert session_holder(message) == holder
