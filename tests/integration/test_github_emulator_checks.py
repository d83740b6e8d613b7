"""The emulator's check runs, commit statuses, workflow-run read and cancel
(docs/github-emulator.md, "Check runs and commit statuses"): who may call each route, and what
each call costs in the REST budget, as on GitHub."""

from __future__ import annotations

import httpx

from rungar.testing.github_emulator import GitHubEmulator
from rungar.testing.github_emulator.harness import emulator
from rungar.testing.github_emulator.model import JobSpec, head_sha

PAT = "emulator-pat"
REPO = "octo-org/app"
RUN = 31


def headers(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def app_token(emu: GitHubEmulator) -> str:
    token, _ = emu.state.tokens.issue_installation_token(1, 3600.0)
    return token


def remaining(emu: GitHubEmulator) -> int:
    return emu.state.rate_remaining


async def test_only_the_owner_may_call_each_route_and_only_an_app_writes_check_runs() -> None:
    async with emulator() as emu, httpx.AsyncClient(base_url=f"{emu.base_url}/api/v3") as http:
        emu.state.queue_job(JobSpec(labels=("linux",), repository=REPO, run_id=RUN))
        sha = head_sha(REPO, RUN)
        app = app_token(emu)
        calls = [
            ("GET", f"/repos/{REPO}/actions/runs/{RUN}", None),
            ("POST", f"/repos/{REPO}/check-runs", {"name": "rungar: linux", "head_sha": sha}),
            ("POST", f"/repos/{REPO}/statuses/{sha}", {"state": "pending"}),
            ("POST", f"/repos/{REPO}/actions/runs/{RUN}/cancel", None),
        ]
        for method, path, body in calls:
            unknown = await http.request(method, path, json=body, headers=headers("nobody"))
            assert unknown.status_code == 401, (path, unknown.text)
            other = await http.request(
                method, path.replace("octo-org", "evil-org"), json=body, headers=headers(app)
            )
            assert other.status_code == 403, (path, other.text)
        # A personal access token cannot write check runs, and the refusal is counted.
        before = remaining(emu)
        refused = await http.post(
            f"/repos/{REPO}/check-runs",
            json={"name": "rungar: linux", "head_sha": sha},
            headers=headers(PAT),
        )
        assert refused.status_code == 403
        assert "GitHub App" in refused.json()["message"]
        assert remaining(emu) == before - 1
        created = await http.post(
            f"/repos/{REPO}/check-runs",
            json={"name": "rungar: linux", "head_sha": sha, "status": "in_progress"},
            headers=headers(app),
        )
        assert created.status_code == 201, created.text
        check_id = created.json()["id"]
        patched = await http.patch(
            f"/repos/{REPO}/check-runs/{check_id}",
            json={"conclusion": "neutral", "output": {"title": "t", "summary": "waited 1m"}},
            headers=headers(PAT),
        )
        assert patched.status_code == 403
        patched = await http.patch(
            f"/repos/{REPO}/check-runs/{check_id}",
            json={"conclusion": "neutral", "output": {"title": "t", "summary": "waited 1m"}},
            headers=headers(app),
        )
        assert patched.status_code == 200 and patched.json()["status"] == "completed"
        # A token may write a commit status; its description is at most 140 characters.
        status = await http.post(
            f"/repos/{REPO}/statuses/{sha}",
            json={"state": "pending", "context": "rungar: linux", "description": "x" * 140},
            headers=headers(PAT),
        )
        assert status.status_code == 201
        long = await http.post(
            f"/repos/{REPO}/statuses/{sha}",
            json={"state": "pending", "description": "x" * 141},
            headers=headers(PAT),
        )
        assert long.status_code == 422


async def test_a_conditional_read_of_an_unchanged_run_costs_nothing_and_a_cancel_ends_it() -> None:
    async with emulator() as emu, httpx.AsyncClient(base_url=f"{emu.base_url}/api/v3") as http:
        job = emu.state.queue_job(JobSpec(labels=("linux",), repository=REPO, run_id=RUN))
        path = f"/repos/{REPO}/actions/runs/{RUN}"
        first = await http.get(path, headers=headers(PAT))
        assert first.status_code == 200 and first.json()["head_sha"] == head_sha(REPO, RUN)
        before = remaining(emu)
        again = await http.get(
            path, headers={**headers(PAT), "if-none-match": first.headers["etag"]}
        )
        assert again.status_code == 304
        assert remaining(emu) == before
        cancel = await http.post(f"{path}/cancel", headers=headers(PAT))
        assert cancel.status_code == 202
        assert job.result == "canceled"
        assert remaining(emu) == before - 1
        done = await http.post(f"{path}/cancel", headers=headers(PAT))
        assert done.status_code == 409
        missing = await http.get(f"/repos/{REPO}/actions/runs/999", headers=headers(PAT))
        assert missing.status_code == 404
