"""What a developer sees of a job on GitHub beyond its log: the workflow run and its head commit,
the check runs and commit statuses written on that commit, and a run's cancellation
(docs/github-emulator.md, "Check runs and commit statuses").

Routes, each counted in the REST budget as GitHub counts it (a 304 to a conditional read of a
workflow run costs nothing):

- R8  ``GET /repos/{o}/{r}/actions/runs/{run_id}``: the run, with its ``head_sha``;
- R9  ``POST /repos/{o}/{r}/check-runs`` and R10 ``PATCH /repos/{o}/{r}/check-runs/{id}``: a
  check run created and updated; a personal access token is refused (403), as on GitHub: only
  a GitHub App writes check runs;
- R11 ``POST /repos/{o}/{r}/statuses/{sha}``: a commit status (its description at most 140
  characters, else 422);
- R12 ``POST /repos/{o}/{r}/actions/runs/{run_id}/cancel``: every job of the run not completed
  ends ``canceled`` (202).

``GET /_fake/state`` shows them all under ``checks``.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from rungar.testing.github_emulator.http import body_json, etag_of, route
from rungar.testing.github_emulator.model import ChecksBook, JobState, head_sha
from rungar.testing.github_emulator.rest import RestRoutes
from rungar.testing.github_emulator.state import EmulatorState

STATUS_DESCRIPTION_MAX = 140  # GitHub's limit on a commit status's description
CHECK_RUN_STATUSES = frozenset({"queued", "in_progress", "completed"})
CHECK_RUN_CONCLUSIONS = frozenset(
    {"success", "failure", "neutral", "cancelled", "skipped", "timed_out", "action_required"}
)
STATUS_STATES = frozenset({"error", "failure", "pending", "success"})


def _invalid(rest: RestRoutes, what: str) -> Response:
    return rest._answer({"message": f"Invalid request: {what}"}, 422)


class ChecksRoutes:
    def __init__(self, state: EmulatorState, rest: RestRoutes) -> None:
        self.state = state
        self.rest = rest
        self.book: ChecksBook = state.checks

    def _repo(self, request: Request) -> str:
        return f"{request.path_params['o']}/{request.path_params['r']}"

    def _allowed(self, request: Request, *, app_only: bool = False) -> Response | str:
        """The repository, when the token may act on it (its owner's; a GitHub App's for
        ``app_only``, as only an App writes check runs); else GitHub's refusal."""
        repo = self._repo(request)
        owner = self.rest._owner(request, f"repos/{repo}")
        if isinstance(owner, Response):
            return owner
        if app_only and self.state.tokens.pats.get(_token(request)) is not None:
            return self.rest._answer({"message": "You must authenticate via a GitHub App."}, 403)
        return repo

    def _spent_and_allowed(self, request: Request, *, app_only: bool = False) -> Response | str:
        """A write: counted in the budget first (a refused one too, as GitHub counts it), then
        :meth:`_allowed`."""
        if (spent := self.rest._spend()) is not None:
            return spent
        return self._allowed(request, app_only=app_only)

    def _run_jobs(self, repo: str, run_id: int) -> list[Any]:
        return [
            j for j in self.state.jobs.values() if j.run_id == run_id and j.spec.repository == repo
        ]

    async def workflow_run(self, request: Request) -> Response:  # R8
        rest, repo = self.rest, self._allowed(request)
        if isinstance(repo, Response):
            return repo
        run_id = int(request.path_params["run_id"])
        jobs = self._run_jobs(repo, run_id)
        if not jobs:
            return rest._answer({"message": "Not Found"}, 404)
        done = all(j.state is JobState.COMPLETED for j in jobs)
        body = {
            "id": run_id,
            "head_sha": head_sha(repo, run_id),
            "status": "completed" if done else "in_progress",
            "repository": {"full_name": repo},
        }
        answer = rest._answer(body, 200)
        # A 304 to a conditional request costs nothing, as on GitHub.
        if request.headers.get("if-none-match", "") == etag_of(bytes(answer.body)):
            return answer  # made a 304 by the route
        if (spent := rest._spend()) is not None:
            return spent
        return rest._answer(body, 200)

    async def create_check_run(self, request: Request) -> Response:  # R9
        rest, repo = self.rest, self._spent_and_allowed(request, app_only=True)
        if isinstance(repo, Response):
            return repo
        body = await body_json(request)
        if not isinstance(body, dict) or not body.get("name") or not body.get("head_sha"):
            return _invalid(rest, "name and head_sha are required")
        check_id = self.state.next_id()
        record = {"id": check_id, "repository": repo, "status": "queued", "conclusion": None}
        problem = _apply(record, body)
        if problem:
            return _invalid(rest, problem)
        record["created_at"] = record["updated_at"] = self.state.clock.now()
        record["updates"] = 0
        self.book.check_runs[check_id] = record
        return rest._answer(_shown(record), 201)

    async def update_check_run(self, request: Request) -> Response:  # R10
        rest, repo = self.rest, self._spent_and_allowed(request, app_only=True)
        if isinstance(repo, Response):
            return repo
        record = self.book.check_runs.get(int(request.path_params["check_id"]))
        if record is None or record["repository"] != repo:
            return rest._answer({"message": "Not Found"}, 404)
        body = await body_json(request)
        if not isinstance(body, dict):
            return _invalid(rest, "a JSON object is required")
        problem = _apply(record, body)
        if problem:
            return _invalid(rest, problem)
        record["updated_at"] = self.state.clock.now()
        record["updates"] += 1
        return rest._answer(_shown(record), 200)

    async def create_status(self, request: Request) -> Response:  # R11
        rest, repo = self.rest, self._spent_and_allowed(request)
        if isinstance(repo, Response):
            return repo
        body = await body_json(request)
        if not isinstance(body, dict) or body.get("state") not in STATUS_STATES:
            return _invalid(rest, "state must be one of error, failure, pending, success")
        description = str(body.get("description") or "")
        if len(description) > STATUS_DESCRIPTION_MAX:
            return _invalid(rest, "description is too long (maximum is 140 characters)")
        status = {
            "id": self.state.next_id(),
            "repository": repo,
            "sha": request.path_params["sha"],
            "state": body["state"],
            "context": str(body.get("context") or "default"),
            "description": description,
            "target_url": body.get("target_url"),
            "created_at": self.state.clock.now(),
        }
        self.book.statuses.append(status)
        return rest._answer(status, 201)

    async def cancel_run(self, request: Request) -> Response:  # R12
        rest, repo = self.rest, self._spent_and_allowed(request)
        if isinstance(repo, Response):
            return repo
        run_id = int(request.path_params["run_id"])
        jobs = self._run_jobs(repo, run_id)
        if not jobs:
            return rest._answer({"message": "Not Found"}, 404)
        if all(j.state is JobState.COMPLETED for j in jobs):
            return rest._answer({"message": "Cannot cancel a workflow run that is completed."}, 409)
        for job in jobs:
            self.state.cancel(job)
        self.book.cancelled_runs.append(
            {"repository": repo, "run_id": run_id, "at": self.state.clock.now()}
        )
        return rest._answer({}, 202)

    def routes(self) -> list[Route]:
        s = self.state
        base = "/api/v3/repos/{o}/{r}"
        return [
            Route(f"{base}/actions/runs/{{run_id:int}}", route(s, "R8", self.workflow_run)),
            Route(f"{base}/check-runs", route(s, "R9", self.create_check_run), methods=["POST"]),
            Route(
                f"{base}/check-runs/{{check_id:int}}",
                route(s, "R10", self.update_check_run),
                methods=["PATCH"],
            ),
            Route(
                f"{base}/statuses/{{sha}}", route(s, "R11", self.create_status), methods=["POST"]
            ),
            Route(
                f"{base}/actions/runs/{{run_id:int}}/cancel",
                route(s, "R12", self.cancel_run),
                methods=["POST"],
            ),
        ]


def _token(request: Request) -> str:
    auth = request.headers.get("authorization", "")
    return auth.split(" ", 1)[1] if " " in auth else ""


def _apply(record: dict[str, Any], body: dict[str, Any]) -> str:
    """Take a check run's fields from ``body`` as GitHub does; a problem's words, or ""."""
    for key in ("name", "head_sha", "details_url", "external_id"):
        if key in body:
            record[key] = str(body[key])
    if "status" in body:
        if body["status"] not in CHECK_RUN_STATUSES:
            return "status must be queued, in_progress or completed"
        record["status"] = body["status"]
    if "conclusion" in body:
        if body["conclusion"] not in CHECK_RUN_CONCLUSIONS:
            return f"conclusion {body['conclusion']!r} is not one GitHub knows"
        record["conclusion"], record["status"] = body["conclusion"], "completed"
    if record["status"] == "completed" and not record.get("conclusion"):
        return "conclusion is required when status is completed"
    output = body.get("output")
    if output is not None:
        if not isinstance(output, dict) or not output.get("title") or not output.get("summary"):
            return "output needs a title and a summary"
        record["output"] = {"title": str(output["title"]), "summary": str(output["summary"])}
    return ""


def _shown(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in ("updates", "repository")}
