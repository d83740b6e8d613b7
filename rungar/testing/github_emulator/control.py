"""The emulator's test-only control API under ``/_fake/`` (docs/github-emulator.md, "Control API").

Queue jobs with their workload, approve, cancel or complete them, drive runners, inject faults,
advance the clock, evict sessions, delete scale sets, redeliver webhooks, and read the request
log (each entry naming its client, user agent and message session, and the status answered) and
a state summary (each scale set with its live message session: id, owner, opened, last poll,
whether a poll is open). docs/github-emulator.md
documents the API. In-process tests may call :class:`EmulatorState` directly instead.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from rungar.model.runner_release import RunnerRelease, parse_date
from rungar.model.runner_version import parse_runner_version
from rungar.testing.github_emulator.clock import EmulatorClock
from rungar.testing.github_emulator.faults import Fault
from rungar.testing.github_emulator.http import body_json, error, json_response
from rungar.testing.github_emulator.model import JobSpec
from rungar.testing.github_emulator.state import EmulatorState
from rungar.testing.github_emulator.webhooks import WebhookSender


def job_spec(d: dict[str, Any]) -> JobSpec:
    labels = d.get("labels") or ["self-hosted"]
    return JobSpec(
        labels=tuple(str(x) for x in labels),
        repository=str(d.get("repository", "octo-org/app")),
        workflow=str(d.get("workflow", "ci.yml")),
        name=str(d.get("name", d.get("job", "build"))),
        duration=float(d.get("duration", 1.0)),
        memory_bytes=int(d.get("memory_bytes", d.get("memoryBytes", 0))),
        cpu=float(d.get("cpu", 0.0)),
        result=str(d.get("result", "succeeded")),
        gated=bool(d.get("gated", False)),
        event_name=str(d.get("event_name", "push")),
        run_id=int(d.get("run_id", d.get("runId", 0))),
    )


class ControlRoutes:
    def __init__(
        self, state: EmulatorState, clock: EmulatorClock, webhooks: WebhookSender | None
    ) -> None:
        self.state = state
        self.clock = clock
        self.webhooks = webhooks

    async def create_job(self, request: Request) -> Response:
        body = await body_json(request)
        job = self.state.queue_job(job_spec(body if isinstance(body, dict) else {}))
        return json_response(
            {
                "jobId": job.job_id,
                "runnerRequestId": job.request_id,
                "workflowJobId": job.workflow_job_id,
            },
            201,
        )

    async def list_jobs(self, request: Request) -> Response:
        jobs = [
            {
                "jobId": j.job_id,
                "state": j.state.value,
                "scaleSetId": j.scale_set_id,
                "runnerName": j.runner_name,
                "result": j.result,
                "reassignments": j.reassignments,
                "labels": list(j.spec.labels),
            }
            for j in self.state.jobs.values()
        ]
        return json_response({"count": len(jobs), "value": jobs})

    async def job_action(self, request: Request) -> Response:
        job = self.state.jobs.get(request.path_params["job_id"])
        if job is None:
            return error(404, "JobNotFoundException", "no such job")
        action = request.path_params["action"]
        if action == "approve":
            self.state.approve(job)
        elif action == "cancel":
            self.state.cancel(job)
        elif action == "complete":
            self.state.complete(job, request.query_params.get("result", "succeeded"))
        else:
            return error(404, "NotFound", f"unknown action {action}")
        return Response(status_code=204)

    async def runner_action(self, request: Request) -> Response:
        name = request.path_params["name"]
        runner = next((r for r in self.state.runners.values() if r.name == name), None)
        if runner is None:
            return error(404, "AgentNotFoundException", f"no runner {name}")
        action = request.path_params["action"]
        if action == "online":
            self.state.connect(runner)
        elif action == "offline":
            runner.online = False
        elif action == "start-job":
            job = self.state.take_job(runner)
            return json_response({"jobId": job.job_id if job else None})
        elif action == "crash":
            self.state.crash_runner(runner)
        elif action == "lost":
            job = self.state.lose_runner(runner)
            return json_response({"jobId": job.job_id if job else None})
        else:
            return error(404, "NotFound", f"unknown action {action}")
        return Response(status_code=204)

    async def add_fault(self, request: Request) -> Response:
        body = await body_json(request)
        if not isinstance(body, dict):
            return error(400, "ArgumentException", "a JSON object is required")
        self.state.faults.add(Fault.from_json(body))
        return Response(status_code=204)

    async def advance(self, request: Request) -> Response:
        self.clock.advance(float(request.query_params.get("seconds", "0")))
        self.state.tick()
        return json_response({"now": self.clock.now()})

    async def scale_set_action(self, request: Request) -> Response:
        scale_set_id = int(request.path_params["id"])
        if scale_set_id not in self.state.scale_sets:
            return error(404, "RunnerScaleSetNotFoundException", "no such scale set")
        action = request.path_params["action"]
        if action == "delete":
            self.state.delete_scale_set(scale_set_id)
        elif action == "stale":
            body = await body_json(request)
            assigned = body.get("assigned") if isinstance(body, dict) else None
            if not isinstance(assigned, int) or assigned < 0:
                return error(400, "ArgumentException", "assigned: a whole number ≥ 0 is required")
            self.state.scale_sets[scale_set_id].phantom_assigned = assigned
        else:
            self.state.evict_session(scale_set_id)
        return Response(status_code=204)

    async def runner_minimum(self, request: Request) -> Response:
        """A fault: GitHub's minimum runner version moves (``{"minimum": "2.331.0"}``; "" takes
        every version); runners that connect from now on are held to it."""
        body = await body_json(request)
        minimum = body.get("minimum") if isinstance(body, dict) else None
        if minimum == "":
            self.state.runner_minimum = None
            return Response(status_code=204)
        parsed = parse_runner_version(minimum)
        if parsed is None:
            return error(400, "ArgumentException", "minimum: a runner version such as 2.329.0")
        self.state.runner_minimum = parsed
        return Response(status_code=204)

    async def runner_release(self, request: Request) -> Response:
        """A fault: GitHub publishes a runner release during a run (``{"version": "2.331.0"}``,
        published now, or ``"published_at"`` an ISO 8601 time, or ``"age"`` emulated seconds
        ago); ``{"version": ""}`` takes every release away (404)."""
        body = await body_json(request)
        d = body if isinstance(body, dict) else {}
        if d.get("version") == "":
            self.state.runner_release = None
            return Response(status_code=204)
        version = parse_runner_version(d.get("version"))
        if version is None:
            return error(400, "ArgumentException", "version: a runner version such as 2.331.0")
        published: float | None = self.state.clock.now()
        if "published_at" in d:
            published = parse_date(d.get("published_at"))
        elif "age" in d:
            age = d.get("age")
            if isinstance(age, int | float) and not isinstance(age, bool) and age >= 0:
                published = self.state.clock.now() - float(age)
            else:
                published = None
        if published is None:
            return error(400, "ArgumentException", "published_at: an ISO 8601 time; age: seconds")
        self.state.runner_release = RunnerRelease(version, published)
        return Response(status_code=204)

    async def app_action(self, request: Request) -> Response:
        """A fault: the App is ``revoke``d (its JWTs and every token minted through it refused
        from now on: 401) or ``restore``d."""
        app = str(request.path_params["app"])
        if app not in self.state.tokens.apps:
            return error(404, "NotFound", f"no app {app}")
        action = request.path_params["action"]
        if action == "revoke":
            self.state.tokens.revoked_apps.add(app)
        elif action == "restore":
            self.state.tokens.revoked_apps.discard(app)
        else:
            return error(404, "NotFound", f"unknown action {action}")
        return Response(status_code=204)

    async def installation_action(self, request: Request) -> Response:
        """A fault: the installation is ``suspend``ed (its tokens 403 at minting and refused
        after) or ``unsuspend``ed."""
        installation = int(request.path_params["iid"])
        if installation not in self.state.tokens.installations:
            return error(404, "NotFound", f"no installation {installation}")
        action = request.path_params["action"]
        if action == "suspend":
            self.state.tokens.suspended.add(installation)
        elif action == "unsuspend":
            self.state.tokens.suspended.discard(installation)
        else:
            return error(404, "NotFound", f"unknown action {action}")
        return Response(status_code=204)

    async def rate_limit(self, request: Request) -> Response:
        body = await body_json(request)
        d = body if isinstance(body, dict) else {}
        self.state.rate_remaining = int(d.get("remaining", 0))
        self.state.rate_reset = self.clock.now() + float(d.get("reset_in", 60))
        return Response(status_code=204)

    async def redeliver(self, request: Request) -> Response:
        if self.webhooks is None or not self.webhooks.redeliver(request.path_params["delivery_id"]):
            return error(404, "NotFound", "no such delivery")
        return Response(status_code=204)

    async def requests(self, request: Request) -> Response:
        return json_response({"count": len(self.state.requests), "value": self.state.requests})

    async def summary(self, request: Request) -> Response:
        s = self.state
        return json_response(
            {
                "now": self.clock.now(),
                "clockFactor": self.clock.factor,
                "scaleSets": [
                    {**s.scale_set_json(r), "session": self._session_json(r.id)}
                    for r in s.scale_sets.values()
                ],
                "runners": [r.to_json() for r in s.runners.values()],
                "runnersCreated": s.runners_created,
                "jobs": {
                    state: sum(1 for j in s.jobs.values() if j.state.value == state)
                    for state in (
                        "queued",
                        "waiting",
                        "available",
                        "assigned",
                        "running",
                        "completed",
                    )
                },
                "faultsFired": len(s.faults.fired),
                "runnerMinimum": str(s.runner_minimum or ""),
                "runnerLatest": str(s.runner_release.version) if s.runner_release else "",
                "throttled": {r: t.refused for r, t in s.faults.throttles.items()},
                # Each caller's (an App installation, "installation:N", or "" for a PAT)
                # calls the throttle let through and the 429s it answered, by route
                "throttledBy": {r: dict(t.refused_by) for r, t in s.faults.throttles.items()},
                "passedBy": {r: dict(t.passed_by) for r, t in s.faults.throttles.items()},
                "registeredBy": dict(s.registered_by),
                "revokedApps": sorted(s.tokens.revoked_apps),
                "suspendedInstallations": sorted(s.tokens.suspended),
                # What a developer sees on the runs' commits (github_emulator.checks)
                "checks": s.checks.to_json(),
            }
        )

    def _session_json(self, scale_set_id: int) -> dict[str, object] | None:
        """The scale set's live message session, or None when no session holds it."""
        session = self.state.live_session(scale_set_id)
        return session.to_json() if session is not None else None

    def routes(self) -> list[Route]:
        return [
            Route("/_fake/jobs", self.create_job, methods=["POST"]),
            Route("/_fake/jobs", self.list_jobs, methods=["GET"]),
            Route("/_fake/jobs/{job_id}/{action}", self.job_action, methods=["POST"]),
            Route("/_fake/runners/{name}/{action}", self.runner_action, methods=["POST"]),
            Route("/_fake/faults", self.add_fault, methods=["POST"]),
            Route("/_fake/clock/advance", self.advance, methods=["POST"]),
            Route("/_fake/scalesets/{id:int}/{action}", self.scale_set_action, methods=["POST"]),
            Route("/_fake/ratelimit", self.rate_limit, methods=["POST"]),
            Route("/_fake/apps/{app}/{action}", self.app_action, methods=["POST"]),
            Route(
                "/_fake/installations/{iid:int}/{action}",
                self.installation_action,
                methods=["POST"],
            ),
            Route("/_fake/runner-minimum", self.runner_minimum, methods=["POST"]),
            Route("/_fake/runner-release", self.runner_release, methods=["POST"]),
            Route("/_fake/webhooks/redeliver/{delivery_id}", self.redeliver, methods=["POST"]),
            Route("/_fake/requests", self.requests, methods=["GET"]),
            Route("/_fake/state", self.summary, methods=["GET"]),
        ]
