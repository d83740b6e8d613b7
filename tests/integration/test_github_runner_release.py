"""GitHub's latest runner release, read through the emulator's REST route as from GitHub
(``GET /repos/actions/runner/releases/latest``): conditionally, a 304 costing no budget, a new
release published during a run seen at the next read, and no release (404) read as none."""

from __future__ import annotations

import httpx

from rungar.model.runner_release import day_of
from rungar.model.runner_version import RunnerVersion
from rungar.testing.github_emulator import GitHubEmulator
from rungar.testing.github_emulator.harness import emulator, github


def release_reads(emu: GitHubEmulator) -> list[dict[str, object]]:
    return [r for r in emu.state.requests if r["route"] == "R13"]


async def test_the_latest_release_is_read_conditionally_and_a_new_one_is_seen() -> None:
    async with emulator() as emu, github(emu) as gh:
        first = await gh.latest_runner_release()
        assert first is not None and first.version == RunnerVersion(2, 330, 0)
        assert first.source == "github"
        left = emu.state.rate_remaining
        again = await gh.latest_runner_release()
        assert again == first
        assert emu.state.rate_remaining == left, "a 304 costs no budget"
        reads = release_reads(emu)
        assert [r["status"] for r in reads] == [200, 304]
        assert "if-none-match" not in reads[0]["headers"]  # type: ignore[operator]  # a dict
        # GitHub publishes 2.331.0, dated 24 days ago on its clock.
        async with httpx.AsyncClient() as http:
            published = await http.post(
                f"{emu.base_url}/_fake/runner-release",
                json={"version": "2.331.0", "age": 24 * 86400},
            )
            assert published.status_code == 204
            refused = await http.post(f"{emu.base_url}/_fake/runner-release", json={"age": 1})
            assert refused.status_code == 400
        newer = await gh.latest_runner_release()
        assert newer is not None and newer.version == RunnerVersion(2, 331, 0)
        assert day_of(newer.published_at) == day_of(emu.state.clock.now() - 24 * 86400)
        assert release_reads(emu)[-1]["status"] == 200


async def test_a_github_without_the_runner_repository_names_no_release() -> None:
    async with emulator() as emu, github(emu) as gh:
        emu.state.runner_release = None
        assert await gh.latest_runner_release() is None
        assert [r["status"] for r in release_reads(emu)] == [404]
