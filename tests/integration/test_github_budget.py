"""The REST budget as GitHub counts it, and what Rungar does with it: runner lists asked for
half as often below 25 % of the budget (a quarter below 10 %), conditional reads whose 304
costs nothing, and the note in ``rungar status``. Measured against the emulator's request log."""

from __future__ import annotations

import httpx

from rungar.github.ratelimit import budget_note
from rungar.testing.clock import FakeClock
from rungar.testing.github_emulator import GitHubEmulator
from rungar.testing.github_emulator.harness import emulator, github

MINUTES = 5


def runner_list_reads(emu: GitHubEmulator) -> int:
    return sum(1 for r in emu.state.requests if r["route"] == "A16")


async def reads_in(emu: GitHubEmulator, remaining: int) -> tuple[int, float, str]:
    """A16 reads while every caller asks for the runner list once a second for five minutes,
    with ``remaining`` of the 5,000-call budget left."""
    emu.state.rate_remaining = remaining
    emu.state.rate_reset = emu.state.clock.now() + 3600
    clock = FakeClock(emu.state.clock.now())
    async with github(emu, clock=clock) as gh:  # type: ignore[arg-type]  # a wound clock
        before = runner_list_reads(emu)
        for _ in range(MINUTES * 60):
            await gh.list_all_runners()
            clock.advance(1.0)
        return runner_list_reads(emu) - before, gh.read_stretch(), gh.budget().note


async def test_at_a_fifth_of_the_budget_the_runner_list_is_read_half_as_often_per_minute() -> None:
    async with emulator() as emu:
        full, stretch_full, note_full = await reads_in(emu, 5000)
        low, stretch_low, note_low = await reads_in(emu, 1000)
        lowest, stretch_lowest, _ = await reads_in(emu, 400)
    assert (stretch_full, stretch_low, stretch_lowest) == (1.0, 2.0, 4.0)
    assert full / MINUTES == 4  # every 15 s
    assert low / MINUTES == full / MINUTES / 2
    assert lowest / MINUTES == full / MINUTES / 4
    assert note_full == ""
    assert note_low == (
        "API budget 998/5000 (20%) left: runner lists half as often until the reset"
    )


async def test_an_unchanged_runner_list_answers_304_and_costs_no_budget() -> None:
    async with emulator() as emu:
        clock = FakeClock(emu.state.clock.now())
        async with github(emu, clock=clock) as gh:  # type: ignore[arg-type]  # a wound clock
            first = await gh.list_all_runners()
            clock.advance(20.0)
            again = await gh.list_all_runners()
            assert first == again
            assert gh.counter.snapshot().get("304") == 1
            assert gh.budget().not_modified == 1
        reads = [r for r in emu.state.requests if r["route"] == "A16"]
        assert "if-none-match" not in reads[0]["headers"]
        assert reads[1]["headers"]["if-none-match"].startswith('"')
        # The REST listing: a 304 is not counted against the budget, a 200 is.
        url = f"{emu.base_url}/api/v3/orgs/octo-org/actions/runners"
        auth = {"Authorization": "Bearer emulator-pat"}
        async with httpx.AsyncClient() as http:
            first_answer = await http.get(url, headers=auth)
            left = int(first_answer.headers["x-ratelimit-remaining"])
            etag = first_answer.headers["etag"]
            for _ in range(3):
                cached = await http.get(url, headers={**auth, "If-None-Match": etag})
                assert cached.status_code == 304
            assert emu.state.rate_remaining == left
            changed = await http.get(url, headers={**auth, "If-None-Match": '"other"'})
            assert changed.status_code == 200
            assert emu.state.rate_remaining == left - 1


def test_the_budget_note_says_a_quarter_below_a_tenth() -> None:
    from rungar.github.ratelimit import RateLimit

    rate = RateLimit(limit=5000, remaining=400, reset_at=2e9)
    assert budget_note(rate, 1e9).endswith("runner lists a quarter as often until the reset")
    assert budget_note(rate, 2e9) == "", "a reading whose reset has passed is fresh budget"
