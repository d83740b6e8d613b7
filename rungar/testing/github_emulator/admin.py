"""The emulator's Actions-service routes A1–A17 under ``/tenant/1/`` (docs/github-emulator.md).

Every call needs ``Authorization: Bearer <admin JWT>`` (not expired) and ``api-version``, except
acquire (A12), which needs the session's message-queue token. Lists use the ``{count, value}``
envelope; errors carry the .NET exception bodies clients match by substring.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from rungar.testing.github_emulator.http import bearer, body_json, error, json_response, route
from rungar.testing.github_emulator.model import stored_runner_setting
from rungar.testing.github_emulator.rest import encode_jit, runner_base
from rungar.testing.github_emulator.state import EmulatorState

SETS = "/tenant/{tid}/_apis/runtime/runnerscalesets"
AGENTS = "/tenant/{tid}/_apis/distributedtask/pools/0/agents"


def envelope(values: list[object]) -> dict[str, object]:
    return {"count": len(values), "value": values}


def _labels(raw: object) -> list[str] | None:
    """A create or update body's label names; None when the service would refuse them: no
    labels, or a label without its name or its type."""
    if not isinstance(raw, list) or not raw:
        return None
    names = []
    for label in raw:
        if not isinstance(label, dict) or not label.get("name") or not label.get("type"):
            return None
        names.append(str(label["name"]))
    return names


def _agents_route(request: Request) -> str:
    """A15 finds a runner by name; A16, the same path without ``agentName``, lists them all."""
    return "A15" if "agentName" in request.query_params else "A16"


class AdminRoutes:
    def __init__(self, state: EmulatorState) -> None:
        self.state = state

    def _denied(self, request: Request) -> Response | None:
        if "api-version" not in request.query_params:
            return error(400, "VssInvalidApiVersionException", "api-version is required")
        if self.state.tokens.check_jwt(bearer(request), "admin") is None:
            return error(401, "VssUnauthorizedException", "admin token missing, invalid or expired")
        return None

    def _scale_set(self, request: Request) -> Response | int:
        scale_set_id = int(request.path_params["id"])
        if scale_set_id not in self.state.scale_sets:
            return error(
                404, "RunnerScaleSetNotFoundException", f"scale set {scale_set_id} not found"
            )
        return scale_set_id

    async def runner_groups(self, request: Request) -> Response:  # A1
        if (denied := self._denied(request)) is not None:
            return denied
        name = request.query_params.get("groupName", "")
        groups = [
            {"id": gid, "name": gname, "size": 0, "isDefaultGroup": gid == 1}
            for gid, gname in self.state.options.runner_groups.items()
            if not name or gname.lower() == name.lower()  # the service ignores case
        ]
        return json_response(envelope(list(groups)))

    async def scale_sets(self, request: Request) -> Response:  # A2 and A4
        if (denied := self._denied(request)) is not None:
            return denied
        name = request.query_params.get("name")
        group = request.query_params.get("runnerGroupId")
        found = [
            self.state.scale_set_json(r)
            for r in self.state.scale_sets.values()
            if (name is None or r.name == name)
            and (group is None or str(r.runner_group_id) == group)
        ]
        return json_response(envelope(list(found)))

    async def create_scale_set(self, request: Request) -> Response:  # A5
        if (denied := self._denied(request)) is not None:
            return denied
        body = await body_json(request)
        if not isinstance(body, dict) or not body.get("name"):
            return error(400, "ArgumentException", "name is required")
        group_id = int(body.get("runnerGroupId") or 1)
        if group_id not in self.state.options.runner_groups:
            return error(404, "RunnerGroupNotFoundException", f"runner group {group_id} not found")
        if self.state.find_scale_set(group_id, str(body["name"])) is not None:
            return error(
                400, "RunnerScaleSetExistsException", "a scale set with this name already exists"
            )
        labels = _labels(body.get("labels"))
        if labels is None:
            return error(
                400, "ArgumentException", "labels are required, each with a name and a type"
            )
        record = self.state.create_scale_set(str(body["name"]), group_id, labels)
        setting = body.get("RunnerSetting")
        if isinstance(setting, dict):
            record.runner_setting = stored_runner_setting(setting)
        return json_response(self.state.scale_set_json(record))

    async def scale_set(self, request: Request) -> Response:  # A3, A6, A7
        if (denied := self._denied(request)) is not None:
            return denied
        found = self._scale_set(request)
        if isinstance(found, Response):
            return found
        record = self.state.scale_sets[found]
        if request.method == "DELETE":
            self.state.delete_scale_set(found)
            return Response(status_code=204)
        if request.method == "PATCH":  # A6: a partial scale set; what it names is replaced
            body = await body_json(request)
            if not isinstance(body, dict):
                return error(400, "ArgumentException", "a JSON object is required")
            group_id = int(body.get("runnerGroupId") or record.runner_group_id)
            if group_id not in self.state.options.runner_groups:
                return error(
                    404, "RunnerGroupNotFoundException", f"runner group {group_id} not found"
                )
            name = str(body.get("name") or record.name)
            other = self.state.find_scale_set(group_id, name)
            if other is not None and other is not record:
                return error(
                    400,
                    "RunnerScaleSetExistsException",
                    "a scale set with this name already exists",
                )
            if "labels" in body:
                labels = _labels(body.get("labels"))
                if labels is None:
                    return error(400, "ArgumentException", "labels need a name and a type each")
                self.state.set_labels(record, labels)
            if isinstance(body.get("RunnerSetting"), dict):  # replaced whole, as GitHub does
                record.runner_setting = stored_runner_setting(body["RunnerSetting"])
            record.name, record.runner_group_id = name, group_id
            self.state.dispatch()  # new labels may match queued jobs
        return json_response(self.state.scale_set_json(record))

    async def sessions(self, request: Request) -> Response:  # A8
        if (denied := self._denied(request)) is not None:
            return denied
        found = self._scale_set(request)
        if isinstance(found, Response):
            return found
        body = await body_json(request)
        owner = str(body.get("ownerName", "")) if isinstance(body, dict) else ""
        session = self.state.open_session(found, owner)
        if session is None:
            # GitHub's own words, naming the owner of the session that holds the scale set.
            live = self.state.live_session(found)
            return error(
                409,
                "RunnerScaleSetSessionConflictException",
                f"The runner scale set {found} already has an active session for owner "
                f"{live.owner if live is not None else ''}.",
            )
        return json_response(self._session_json(request, session.session_id))

    def _session_json(self, request: Request, session_id: str) -> dict[str, object]:
        s = self.state
        session = s.sessions[session_id]
        record = s.scale_sets[session.scale_set_id]
        token = s.tokens.issue_jwt(
            {"kind": "mq", "sid": session_id, "ss": record.id}, s.options.mq_token_ttl
        )
        base = str(request.base_url).rstrip("/")
        return {
            "sessionId": session_id,
            "ownerName": session.owner,
            "runnerScaleSet": s.scale_set_json(record),
            "messageQueueUrl": f"{base}/mq/{record.id}?sessionId={session_id}",
            "messageQueueAccessToken": token,
            "statistics": s.statistics(record.id),
        }

    async def session(self, request: Request) -> Response:  # A9, A10
        if (denied := self._denied(request)) is not None:
            return denied
        found = self._scale_set(request)
        if isinstance(found, Response):
            return found
        session = self.state.sessions.get(request.path_params["sid"])
        live = self.state.live_session(found)
        if session is None or live is None or live.session_id != session.session_id:
            if request.method == "DELETE":
                sid = request.path_params["sid"]
                return error(
                    400,
                    "RunnerScaleSetSessionExpiredException",
                    f"The session identifier {sid} is not valid.",
                )
            return error(
                404,
                "RunnerAdminException",
                "Session refresh failed for a session ID that doesn't exist.",
            )
        if request.method == "DELETE":
            session.alive = False
            return Response(status_code=204)
        session.touch(self.state.clock.now(), self.state.clock.wall())
        return json_response(self._session_json(request, session.session_id))

    async def acquirable_jobs(self, request: Request) -> Response:  # A11
        if (denied := self._denied(request)) is not None:
            return denied
        found = self._scale_set(request)
        if isinstance(found, Response):
            return found
        from rungar.testing.github_emulator.model import JobState

        jobs = [
            {k: v for k, v in j.event("JobAvailable", acquireJobUrl="").items() if "Time" not in k}
            for j in self.state.jobs.values()
            if j.scale_set_id == found and j.state is JobState.AVAILABLE
        ]
        return json_response(envelope(list(jobs))) if jobs else Response(status_code=204)

    async def acquire_jobs(
        self, request: Request
    ) -> Response:  # A12: the mq token, not the admin one
        if "api-version" not in request.query_params:
            return error(400, "VssInvalidApiVersionException", "api-version is required")
        found = self._scale_set(request)
        if isinstance(found, Response):
            return found
        claims = self.state.tokens.check_jwt(bearer(request), "mq")
        live = self.state.live_session(found)
        if claims is None or live is None or claims.get("sid") != live.session_id:
            return error(
                401, "VssUnauthorizedException", "message queue token missing, invalid or expired"
            )
        body = await body_json(request)
        ids = [int(x) for x in body if isinstance(x, int)] if isinstance(body, list) else []
        return json_response(envelope(list(self.state.acquire(found, ids))))

    async def generate_jit(self, request: Request) -> Response:  # A13
        if (denied := self._denied(request)) is not None:
            return denied
        found = self._scale_set(request)
        if isinstance(found, Response):
            return found
        body = await body_json(request)
        name = str(body.get("name", "")) if isinstance(body, dict) else ""
        if not name:
            return error(400, "ArgumentException", "name is required")
        runner = self.state.register_runner(found, name)
        if runner is None:
            return error(409, "AgentExistsException", f"A runner named {name} already exists.")
        caller = self.state.tokens.caller_of(bearer(request))
        self.state.registered_by[caller] = self.state.registered_by.get(caller, 0) + 1
        work = str(body.get("workFolder", "")) if isinstance(body, dict) else ""
        jit = encode_jit(
            self.state.tokens,
            runner_base(self.state, request),
            runner.id,
            name,
            runner.credential,
            work,
        )
        return json_response({"runner": runner.to_json(), "encodedJITConfig": jit})

    async def agents(self, request: Request) -> Response:  # A15, A16
        if (denied := self._denied(request)) is not None:
            return denied
        name = request.query_params.get("agentName")
        found = [r.to_json() for r in self.state.runners.values() if name is None or r.name == name]
        return json_response(envelope(list(found)))

    async def agent(self, request: Request) -> Response:  # A14, A17
        if (denied := self._denied(request)) is not None:
            return denied
        runner_id = int(request.path_params["rid"])
        if request.method == "DELETE":
            outcome = self.state.remove_runner(runner_id)
            if outcome == "busy":
                return error(
                    400, "JobStillRunningException", f"Runner {runner_id} is running a job."
                )
            if outcome == "missing":
                return error(404, "AgentNotFoundException", f"Runner {runner_id} not found.")
            return Response(status_code=204)
        runner = self.state.runners.get(runner_id)
        if runner is None:
            return error(404, "AgentNotFoundException", f"Runner {runner_id} not found.")
        return json_response(runner.to_json())

    def routes(self) -> list[Route]:
        s = self.state
        return [
            Route(
                "/tenant/{tid}/_apis/runtime/runnergroups/",
                route(s, "A1", self.runner_groups),
                methods=["GET"],
            ),
            Route(SETS, route(s, "A2", self.scale_sets), methods=["GET"]),
            Route(SETS, route(s, "A5", self.create_scale_set), methods=["POST"]),
            Route(
                SETS + "/{id:int}",
                route(s, {"GET": "A3", "PATCH": "A6", "DELETE": "A7"}, self.scale_set),
                methods=["GET", "PATCH", "DELETE"],
            ),
            Route(SETS + "/{id:int}/sessions", route(s, "A8", self.sessions), methods=["POST"]),
            Route(
                SETS + "/{id:int}/sessions/{sid}",
                route(s, {"PATCH": "A9", "DELETE": "A10"}, self.session),
                methods=["PATCH", "DELETE"],
            ),
            Route(
                SETS + "/{id:int}/acquirablejobs",
                route(s, "A11", self.acquirable_jobs),
                methods=["GET"],
            ),
            Route(
                SETS + "/{id:int}/acquirejobs", route(s, "A12", self.acquire_jobs), methods=["POST"]
            ),
            Route(
                SETS + "/{id:int}/generatejitconfig",
                route(s, "A13", self.generate_jit),
                methods=["POST"],
            ),
            Route(AGENTS, route(s, _agents_route, self.agents), methods=["GET"]),
            Route(
                AGENTS + "/{rid:int}",
                route(s, {"GET": "A14", "DELETE": "A17"}, self.agent),
                methods=["GET", "DELETE"],
            ),
        ]
