"""GitHub's latest release of the Actions runner, read from its REST API
(``GET /repos/actions/runner/releases/latest`` on the configured API base), conditionally.

The read goes through :class:`rungar.github.client.ScaleSetClient`'s REST path, so it shares
its transport, retries and REST budget; it carries ``If-None-Match`` with the last answer's
ETag, and GitHub counts a 304 against no budget. A GitHub that has no such repository (a GitHub
Enterprise Server without it) answers 404: then no release is known from GitHub and the one
rungar.yaml names counts (docs/github.md, "Runner versions").
"""

from __future__ import annotations

from rungar.errors import GitHubError
from rungar.github.client import ScaleSetClient
from rungar.model.runner_release import RunnerRelease, release_of

LATEST_RELEASE = "repos/actions/runner/releases/latest"


class LatestRunnerRelease:
    """The last answer to the latest-release read, and its ETag for the next one."""

    def __init__(self) -> None:
        self._etag = ""
        self.release: RunnerRelease | None = None
        self.not_modified = 0  # 304 answers: reads that cost nothing

    async def read(self, client: ScaleSetClient) -> RunnerRelease | None:
        """The latest release; None when GitHub publishes none here (404). Raises GitHubError
        when GitHub does not answer, or answers what names no runner version and date."""
        headers = {"If-None-Match": self._etag} if self._etag and self.release else None
        r = await client.rest("GET", LATEST_RELEASE, headers=headers)
        if r.status == 304 and self.release is not None:
            self.not_modified += 1
            return self.release
        if r.status == 404:
            self._etag, self.release = "", None
            return None
        release = release_of(client.checked_object(r, "read the latest runner release"))
        if release is None:
            raise GitHubError(
                "read the latest runner release: the answer names no runner version and date",
                r.status,
            )
        self._etag, self.release = r.headers.get("etag", "")[:200], release
        return release
