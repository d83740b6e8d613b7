"""The emulator's REST routes under ``/api/v3`` (docs/github-emulator.md).

R1 checks the App JWT; R2 and R4/R5 take a PAT or an installation token of the scope's owner;
R3 takes ``RemoteAuth <registration token>`` for the same scope and returns the admin URL and JWT.
Every answer carries ``x-ratelimit-*`` headers; a spent budget answers 403 until the reset. As on
GitHub, ``GET /rate_limit`` and a 304 to a conditional request (``If-None-Match``) cost nothing.
"""

from __future__ import annotations

import base64
import json
import secrets
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from rungar.testing.github_emulator.http import bearer, body_json, etag_of, json_response, route
from rungar.testing.github_emulator.model import Job, JobState
from rungar.testing.github_emulator.state import EmulatorState
from rungar.testing.github_emulator.tokens import STATELESS_S2S_HEADER, TokenAuthority


def iso(ts: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def scope_of_url(url: str) -> str:
    """The REST scope a config URL designates (``orgs/o``, ``repos/o/r``, ``enterprises/e``)."""
    segments = [s for s in urlsplit(url.strip().strip("/")).path.split("/") if s]
    if len(segments) == 2 and segments[0] == "enterprises":
        return f"enterprises/{segments[1]}"
    if len(segments) == 2:
        return f"repos/{segments[0]}/{segments[1]}"
    return f"orgs/{segments[0]}" if segments else ""


def scope_owner(scope: str) -> str:
    return scope.split("/")[1] if "/" in scope else ""


def runner_base(state: EmulatorState, request: Request) -> str:
    """Where a runner registered by ``request`` reaches the emulator (``runner_url``, else the
    URL the request came to)."""
    return state.options.runner_url or str(request.base_url).rstrip("/")


def encode_jit(
    tokens: TokenAuthority,
    base: str,
    runner_id: int,
    name: str,
    credential: str,
    work_folder: str,
) -> str:
    """A JIT config shaped like GitHub's: base64 JSON of base64 runner files. It and the runner
    credential inside it are kept among the secrets ``tokens`` handed out."""

    def b64(obj: object) -> str:
        return base64.b64encode(json.dumps(obj).encode()).decode()

    files = {
        ".runner": b64(
            {
                "AgentId": runner_id,
                "AgentName": name,
                "PoolId": 0,
                "ServerUrl": f"{base}/tenant/1/",
                "ServerUrlV2": f"{base}/_runner/",
                "WorkFolder": work_folder or "_work",
                "Ephemeral": True,
                "DisableUpdate": True,
                "UseV2Flow": True,
            }
        ),
        ".credentials": b64({"scheme": "OAuth", "data": {"token": credential, "serverUrl": base}}),
        ".credentials_rsaparams": b64({}),
    }
    jit = base64.b64encode(json.dumps(files).encode()).decode()
    tokens.remember(credential)
    tokens.remember(jit)
    return jit


class RestRoutes:
    def __init__(self, state: EmulatorState) -> None:
        self.state = state

    def _limit_headers(self) -> dict[str, str]:
        s = self.state
        return {
            "x-ratelimit-limit": str(s.options.rate_limit),
            "x-ratelimit-remaining": str(max(0, s.rate_remaining)),
            "x-ratelimit-used": str(s.options.rate_limit - max(0, s.rate_remaining)),
            "x-ratelimit-reset": str(self._reset_header()),
            "x-ratelimit-resource": "core",
        }

    def _reset_header(self) -> int:
        """When the budget comes back, as a client reads it: by the wall clock (the window runs
        on the emulated one), in whole seconds as GitHub writes it."""
        return int(self.state.clock.wall_of(self.state.rate_reset))

    def _spend(self) -> Response | None:
        """Count a REST call against the budget; a 403 when it is spent."""
        s = self.state
        now = s.clock.now()
        if now >= s.rate_reset:
            s.rate_remaining, s.rate_reset = s.options.rate_limit, now + 3600
        if s.rate_remaining <= 0:
            return json_response(
                {
                    "message": "API rate limit exceeded",
                    "documentation_url": "https://docs.github.com",
                },
                403,
                self._limit_headers(),
            )
        s.rate_remaining -= 1
        return None

    def _answer(self, data: object, status: int) -> Response:
        return json_response(data, status, self._limit_headers())

    def _owner(self, request: Request, scope: str) -> Response | str:
        token = bearer(request)
        owner = self.state.tokens.rest_owner(token) if token else None
        if owner is None:
            return self._answer({"message": "Bad credentials"}, 401)
        if owner != scope_owner(scope):
            return self._answer({"message": "Resource not accessible by integration"}, 403)
        return owner

    async def access_token(self, request: Request) -> Response:  # R1
        if (spent := self._spend()) is not None:
            return spent
        installation_id = int(request.path_params["iid"])
        app_id = self.state.tokens.check_app_jwt(bearer(request))
        if app_id is None:
            return self._answer({"message": "A JSON web token could not be decoded"}, 401)
        if installation_id not in self.state.tokens.installations:
            return self._answer({"message": "Not Found"}, 404)
        if installation_id in self.state.tokens.suspended:
            return self._answer({"message": "This installation has been suspended"}, 403)
        token, expires = self.state.tokens.issue_installation_token(
            installation_id,
            self.state.options.token_ttl,
            app_id,
            request.headers.get(STATELESS_S2S_HEADER, ""),
        )
        body = {
            "token": token,
            "expires_at": iso(expires),
            "permissions": {},
            "repository_selection": "all",
        }
        return self._answer(body, 201)

    async def registration_token(self, request: Request) -> Response:  # R2
        if (spent := self._spend()) is not None:
            return spent
        scope = request.url.path.removeprefix("/api/v3/").removesuffix(
            "/actions/runners/registration-token"
        )
        owner = self._owner(request, scope)
        if isinstance(owner, Response):
            return owner
        token, expires = self.state.tokens.issue_registration_token(
            owner,
            scope,
            self.state.options.token_ttl,
            self.state.tokens.rest_issued(bearer(request)),
        )
        return self._answer({"token": token, "expires_at": iso(expires)}, 201)

    async def runner_registration(self, request: Request) -> Response:  # R3
        if (spent := self._spend()) is not None:
            return spent
        issued = self.state.tokens.check_registration_token(bearer(request, "RemoteAuth"))
        if issued is None:
            return self._answer({"message": "Bad registration token"}, 401)
        body = await body_json(request)
        url = body.get("url", "") if isinstance(body, dict) else ""
        if scope_of_url(url) != issued.scope_url:
            return self._answer({"message": "url does not match the token's scope"}, 403)
        claims: dict[str, object] = {"kind": "admin", "owner": issued.owner}
        if issued.installation:  # whose registration limit its JIT configs count against
            claims |= {"inst": issued.installation, "app": issued.app}
        admin = self.state.tokens.issue_jwt(claims, self.state.options.admin_token_ttl)
        base = str(request.base_url).rstrip("/")
        answer = {
            "url": f"{base}/tenant/1/",
            "token": admin,
            "token_schema": "OAuthAccessToken",
            "use_v2_flow": True,
        }
        return self._answer(answer, self.state.options.registration_status)

    async def rest_jit(self, request: Request) -> Response:  # R4
        if (spent := self._spend()) is not None:
            return spent
        scope = request.url.path.removeprefix("/api/v3/").removesuffix(
            "/actions/runners/generate-jitconfig"
        )
        owner = self._owner(request, scope)
        if isinstance(owner, Response):
            return owner
        body = await body_json(request)
        if not isinstance(body, dict) or not body.get("labels") or "runner_group_id" not in body:
            return self._answer(
                {"message": "Invalid request: runner_group_id and labels are required"}, 422
            )
        name = str(body.get("name", ""))
        s = self.state
        if s.runners.has_name(name):
            return self._answer(
                {"message": "Already exists - A runner with the same name already exists"}, 409
            )
        # A REST runner belongs to no scale set: it takes jobs by labels, which the dispatcher
        # does not route; it exists so webhook-driven pools can be exercised end to end.
        from rungar.testing.github_emulator.model import Runner

        runner = Runner(
            s.next_id(),
            name,
            0,
            "rc_rest_" + secrets.token_hex(16),
            s.clock.now(),
            labels=tuple(body["labels"]),
        )
        s.runners[runner.id] = runner
        s.runners_created += 1
        jit = encode_jit(
            s.tokens, runner_base(s, request), runner.id, name, runner.credential, "_work"
        )
        return self._answer({"runner": runner.to_json(), "encoded_jit_config": jit}, 201)

    async def list_runners(self, request: Request) -> Response:  # R5
        scope = request.url.path.removeprefix("/api/v3/").removesuffix("/actions/runners")
        owner = self._owner(request, scope)
        if isinstance(owner, Response):
            return owner
        runners = [r.to_json() for r in self.state.runners.values()]
        answer = self._answer({"total_count": len(runners), "runners": runners}, 200)
        # A 304 to a conditional request costs nothing, as on GitHub; anything else one call.
        if request.headers.get("if-none-match", "") == etag_of(bytes(answer.body)):
            return answer  # made a 304 by the route
        if (spent := self._spend()) is not None:
            return spent
        return self._answer({"total_count": len(runners), "runners": runners}, 200)

    def _run_job_json(self, job: Job) -> dict[str, object]:
        conclusion = {"succeeded": "success", "failed": "failure", "canceled": "cancelled"}
        return {
            "id": job.workflow_job_id,
            "run_id": job.run_id,
            "run_attempt": job.attempt,
            "name": job.spec.name,
            "status": "completed" if job.state is JobState.COMPLETED else job.state.value,
            "conclusion": conclusion.get(job.result.lower(), job.result.lower() or None),
            "runner_name": job.runner_name or None,
            "labels": list(job.spec.labels),
        }

    async def run_jobs(self, request: Request) -> Response:  # R6
        if (spent := self._spend()) is not None:
            return spent
        repo = f"{request.path_params['o']}/{request.path_params['r']}"
        owner = self._owner(request, f"repos/{repo}")
        if isinstance(owner, Response):
            return owner
        run_id = int(request.path_params["run_id"])
        latest = request.query_params.get("filter", "latest") == "latest"
        jobs = [
            self._run_job_json(j)
            for j in self.state.jobs.values()
            if j.run_id == run_id and j.spec.repository == repo and not (latest and j.rerun_by)
        ]
        return self._answer({"total_count": len(jobs), "jobs": jobs}, 200)

    async def rerun_job(self, request: Request) -> Response:  # R7
        if (spent := self._spend()) is not None:
            return spent
        repo = f"{request.path_params['o']}/{request.path_params['r']}"
        owner = self._owner(request, f"repos/{repo}")
        if isinstance(owner, Response):
            return owner
        wanted = int(request.path_params["job_id"])
        job = next(
            (
                j
                for j in self.state.jobs.values()
                if j.workflow_job_id == wanted and j.spec.repository == repo
            ),
            None,
        )
        if job is None:
            return self._answer({"message": "Not Found"}, 404)
        again = self.state.rerun(job)
        if again is None:
            return self._answer({"message": "This job cannot be re-run."}, 403)
        return self._answer({}, 201)

    async def runner_release(self, request: Request) -> Response:  # R13
        """The latest release of actions/runner, as GitHub's REST API names it; any token of
        the emulator's is enough (the repository is public)."""
        token = bearer(request)
        if not token or self.state.tokens.rest_owner(token) is None:
            return self._answer({"message": "Bad credentials"}, 401)
        release = self.state.runner_release
        if release is None:
            if (spent := self._spend()) is not None:
                return spent
            return self._answer({"message": "Not Found"}, 404)
        tag = f"v{release.version}"
        body = {
            "tag_name": tag,
            "name": tag,
            "draft": False,
            "prerelease": False,
            "published_at": iso(release.published_at),
            "html_url": f"https://github.com/actions/runner/releases/tag/{tag}",
        }
        answer = self._answer(body, 200)
        # A 304 to a conditional request costs nothing, as on GitHub; anything else one call.
        if request.headers.get("if-none-match", "") == etag_of(bytes(answer.body)):
            return answer  # made a 304 by the route
        if (spent := self._spend()) is not None:
            return spent
        return self._answer(body, 200)

    async def rate_limit(self, request: Request) -> Response:
        s = self.state
        core = {
            "limit": s.options.rate_limit,
            "remaining": s.rate_remaining,
            "reset": self._reset_header(),
        }
        return self._answer({"resources": {"core": core}, "rate": core}, 200)

    def routes(self) -> list[Route]:
        s = self.state
        scopes = ["orgs/{o}", "repos/{o}/{r}", "enterprises/{e}"]
        out = [
            Route(
                "/api/v3/app/installations/{iid:int}/access_tokens",
                route(s, "R1", self.access_token),
                methods=["POST"],
            ),
            Route(
                "/api/v3/actions/runner-registration",
                route(s, "R3", self.runner_registration),
                methods=["POST"],
            ),
            Route("/api/v3/rate_limit", route(s, "R5", self.rate_limit), methods=["GET"]),
            Route(
                "/api/v3/repos/actions/runner/releases/latest",
                route(s, "R13", self.runner_release),
                methods=["GET"],
            ),
        ]
        out += [
            Route(
                "/api/v3/repos/{o}/{r}/actions/runs/{run_id:int}/jobs",
                route(s, "R6", self.run_jobs),
                methods=["GET"],
            ),
            Route(
                "/api/v3/repos/{o}/{r}/actions/jobs/{job_id:int}/rerun",
                route(s, "R7", self.rerun_job),
                methods=["POST"],
            ),
        ]
        for scope in scopes:
            out += [
                Route(
                    f"/api/v3/{scope}/actions/runners/registration-token",
                    route(s, "R2", self.registration_token),
                    methods=["POST"],
                ),
                Route(
                    f"/api/v3/{scope}/actions/runners/generate-jitconfig",
                    route(s, "R4", self.rest_jit),
                    methods=["POST"],
                ),
                Route(
                    f"/api/v3/{scope}/actions/runners",
                    route(s, "R5", self.list_runners),
                    methods=["GET"],
                ),
            ]
        return out
