"""The message queue (``/mq/{id}``) and the fake runner's side (``/_runner/``) of the emulator.

MQ (docs/github.md, "The message queue"): GET needs the session's mq token (401 otherwise) and a
live session (404 once evicted or the scale set is gone); it records ``X-ScaleSetMaxCapacity``
(missing = unlimited, or 400 in strict mode), returns the oldest unacked message after
``lastMessageId``, or waits up to ``long_poll_seconds`` and answers 202; while it waits its session
stays alive, even across a clock jump past the session TTL. DELETE acks (204).

The runner side is this project's reduction of what a real runner does with its JIT config:
connect once with the credential the JIT config carries (a second use is refused), wait
for a job of its scale set, report the result. The job carries its workload (duration, memory,
CPU) and the clock factor so the runner can compress the duration.
"""

from __future__ import annotations

import asyncio
import json

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from rungar.model.runner_version import deprecated_message, runner_version_of
from rungar.testing.github_emulator.http import bearer, body_json, error, json_response, route
from rungar.testing.github_emulator.model import Job, Runner, ScaleSetRecord, SessionRecord
from rungar.testing.github_emulator.state import EmulatorState

POLL_SLICE = 0.25  # real seconds between re-checks while a long poll waits


class QueueRoutes:
    def __init__(self, state: EmulatorState) -> None:
        self.state = state

    def _session(self, request: Request) -> Response | tuple[ScaleSetRecord, SessionRecord]:
        s = self.state
        claims = s.tokens.check_jwt(bearer(request), "mq")
        if claims is None:
            return error(
                401, "VssUnauthorizedException", "message queue token missing, invalid or expired"
            )
        scale_set_id = int(request.path_params["id"])
        record = s.scale_sets.get(scale_set_id)
        session = s.sessions.get(str(claims.get("sid")))
        if record is None:
            return error(
                404, "RunnerScaleSetNotFoundException", f"scale set {scale_set_id} not found"
            )
        if session is None or not session.alive or session.scale_set_id != scale_set_id:
            return error(404, "RunnerAdminException", "the message session does not exist")
        live = s.live_session(scale_set_id)
        if live is None or live.session_id != session.session_id:
            return error(404, "RunnerAdminException", "the message session expired")
        return record, session

    async def get_message(self, request: Request) -> Response:
        s = self.state
        found = self._session(request)
        if isinstance(found, Response):
            return found
        record, session = found
        capacity = request.headers.get("x-scalesetmaxcapacity")
        if capacity is None:
            if s.options.strict_capacity:
                return error(400, "ArgumentException", "X-ScaleSetMaxCapacity is required")
            record.max_capacity = None
        else:
            try:
                record.max_capacity = int(capacity)
            except ValueError:
                return error(400, "ArgumentException", "X-ScaleSetMaxCapacity must be an integer")
            if record.max_capacity < 0:
                return error(400, "ArgumentException", "X-ScaleSetMaxCapacity must not be negative")
        session.touch(s.clock.now(), s.clock.wall())
        record.polled = True
        try:
            last = int(request.query_params.get("lastMessageId", "0") or 0)
        except ValueError:
            last = 0
        # While this poll is open its session is not stale, whatever the clock does: a jump past
        # the session TTL (POST /_fake/clock/advance) must not end the session being polled.
        session.polls += 1
        try:
            return await self._long_poll(record, session, last)
        finally:
            session.polls -= 1
            session.touch(s.clock.now(), s.clock.wall())

    async def _long_poll(
        self, record: ScaleSetRecord, session: SessionRecord, last: int
    ) -> Response:
        s = self.state
        s.dispatch()  # capacity may have grown
        loop = asyncio.get_running_loop()
        deadline = loop.time() + s.options.long_poll_seconds
        while True:
            if not session.alive or s.scale_sets.get(record.id) is not record:
                return error(404, "RunnerAdminException", "the message session ended")
            message = s.next_message(record, last)
            if message is not None:
                return json_response(
                    {
                        "messageId": message.message_id,
                        "messageType": "RunnerScaleSetJobMessages",
                        "statistics": s.statistics(record.id),
                        "body": json.dumps(message.events),
                    }
                )
            left = deadline - loop.time()
            if left <= 0 or s.closing:
                return Response(status_code=202)
            waiters = {
                asyncio.ensure_future(record.changed.wait()),
                asyncio.ensure_future(s.clock.advanced.wait()),
            }
            await asyncio.wait(
                waiters, timeout=min(left, POLL_SLICE), return_when=asyncio.FIRST_COMPLETED
            )
            for waiter in waiters:
                waiter.cancel()
            s.tick()

    async def delete_message(self, request: Request) -> Response:
        found = self._session(request)
        if isinstance(found, Response):
            return found
        record, _ = found
        if not self.state.ack(record, int(request.path_params["mid"])):
            return error(404, "MessageNotFoundException", "no such message")
        return Response(status_code=204)

    # ---- the runner side ------------------------------------------------------------------

    def _runner(self, request: Request) -> Runner | None:
        return self.state.runner_by_credential(bearer(request))

    def _job_json(self, job: Job) -> dict[str, object]:
        return {
            "jobId": job.job_id,
            "displayName": job.spec.name,
            "repository": job.spec.repository,
            "workflow": job.spec.workflow,
            "duration": job.spec.duration,
            "memoryBytes": job.spec.memory_bytes,
            "cpu": job.spec.cpu,
            "result": job.spec.result,
            "clockFactor": self.state.clock.factor,
        }

    async def connect(self, request: Request) -> Response:
        runner = self._runner(request)
        if runner is None:
            return error(401, "VssUnauthorizedException", "unknown runner credential")
        version = runner_version_of(request.headers.get("user-agent", ""))
        if self.state.refuses_version(version):
            # GitHub's answer to a runner below its minimum; the JIT config stays unused.
            return error(403, "Forbidden", deprecated_message(version))
        if not self.state.connect(runner):
            return error(409, "RunnerJitConfigUsedException", "this JIT config was already used")
        return json_response(
            {"runnerId": runner.id, "name": runner.name, "clockFactor": self.state.clock.factor}
        )

    async def next_job(self, request: Request) -> Response:
        s = self.state
        runner = self._runner(request)
        if runner is None or not runner.online:
            return error(401, "VssUnauthorizedException", "runner not connected")
        wait = min(float(request.query_params.get("wait", "10") or 10), 60.0)
        deadline = asyncio.get_running_loop().time() + wait
        while True:
            job = s.take_job(runner)
            if job is not None:
                return json_response(self._job_json(job))
            left = deadline - asyncio.get_running_loop().time()
            record = s.scale_sets.get(runner.scale_set_id)
            if left <= 0 or record is None or runner.id not in s.runners or s.closing:
                return Response(status_code=204)
            waiter = asyncio.ensure_future(record.changed.wait())
            await asyncio.wait({waiter}, timeout=min(left, POLL_SLICE))
            waiter.cancel()

    async def complete_job(self, request: Request) -> Response:
        runner = self._runner(request)
        job = self.state.jobs.get(request.path_params["job_id"])
        if runner is None or job is None or job.runner_id != runner.id:
            return error(404, "JobNotFoundException", "no such job for this runner")
        body = await body_json(request)
        result = str(body.get("result", "succeeded")) if isinstance(body, dict) else "succeeded"
        self.state.complete(job, result)
        return Response(status_code=204)

    def routes(self) -> list[Route]:
        s = self.state
        return [
            Route("/mq/{id:int}", route(s, "MQ_GET", self.get_message), methods=["GET"]),
            Route(
                "/mq/{id:int}/{mid:int}",
                route(s, "MQ_DELETE", self.delete_message),
                methods=["DELETE"],
            ),
            Route("/_runner/connect", route(s, "RUNNER", self.connect), methods=["POST"]),
            Route("/_runner/job", route(s, "RUNNER", self.next_job), methods=["GET"]),
            Route(
                "/_runner/jobs/{job_id}/complete",
                route(s, "RUNNER", self.complete_job),
                methods=["POST"],
            ),
        ]
