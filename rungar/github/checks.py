"""What a developer sees of a waiting job on GitHub: a check run (or, with a personal access
token, a commit status) on its workflow run's head commit, and the run's cancellation
(docs/github.md, "Why a job waits, on GitHub").

Each call is one REST request through :class:`rungar.github.client.ScaleSetClient`, so it
shares the client's transport, retries, rate-limit handling and request counting. A check run
needs a GitHub App with ``Checks: write``; a commit status ``Commit statuses: write`` (a
fine-grained token) or ``repo:status`` (a classic one); a cancel ``Actions: write``.
Whatever GitHub answers is checked before it is believed: a head commit is 40 hex digits, a
check run's id a positive integer.
"""

from __future__ import annotations

import re
from typing import Any

from rungar.errors import GitHubError
from rungar.github.client import ScaleSetClient

SHA = re.compile(r"^[0-9a-f]{40}$")
STATUS_DESCRIPTION_MAX = 140  # GitHub's limit on a commit status's description
CUT = "…"


def fit(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, ending ``…`` when cut."""
    return text if len(text) <= limit else text[: limit - len(CUT)].rstrip() + CUT


async def head_commit(client: ScaleSetClient, repository: str, run_id: str) -> str:
    """The workflow run's head commit (its ``head_sha``)."""
    r = await client.rest("GET", f"repos/{repository}/actions/runs/{run_id}")
    sha = str(client.checked_object(r, f"read workflow run {run_id}").get("head_sha", ""))
    if not SHA.match(sha):
        raise GitHubError(f"workflow run {run_id}: answer lacks a head commit", r.status)
    return sha


async def write_check_run(
    client: ScaleSetClient, repository: str, check_run_id: int, body: dict[str, Any]
) -> int:
    """Create the check run (``check_run_id`` 0) or update it; its id."""
    if check_run_id:
        path = f"repos/{repository}/check-runs/{check_run_id}"
        r = await client.rest("PATCH", path, body)
        answer = client.checked_object(r, f"update check run {check_run_id}")
    else:
        r = await client.rest("POST", f"repos/{repository}/check-runs", body)
        answer = client.checked_object(r, "create check run", (201,))
    found = answer.get("id")
    if not isinstance(found, int) or isinstance(found, bool) or found <= 0:
        raise GitHubError("check run: answer lacks its id", r.status)
    return found


async def write_commit_status(
    client: ScaleSetClient, repository: str, sha: str, body: dict[str, Any]
) -> None:
    r = await client.rest("POST", f"repos/{repository}/statuses/{sha}", body)
    client.checked_object(r, "create commit status", (201,))


async def cancel_workflow_run(client: ScaleSetClient, repository: str, run_id: str) -> None:
    """Cancel the run; one already completed (409) is no error."""
    r = await client.rest("POST", f"repos/{repository}/actions/runs/{run_id}/cancel", {})
    if r.status not in (202, 409):
        client.checked_object(r, f"cancel workflow run {run_id}", (202,))
