"""Every call of the scale-set protocol, one method each (docs/github.md, "Every call").

``ScaleSetClient`` knows the routes, the headers and what each status means; it does not decide
what to do about a lost session or a deleted scale set (``session.MessageSession`` and
``listener.Listener`` do). A 401 on a REST or admin call refreshes the credential and retries
once; transient failures and rate limits are retried below it, in :mod:`rungar.github.transport`.
Answers that change the caller's next step raise the classes of :mod:`rungar.github.exceptions`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from rungar.errors import GitHubError
from rungar.github.auth import REST_ACCEPT, AdminChain, TokenSource, error_message
from rungar.github.exceptions import (
    GarbledAnswer,
    MessageQueueTokenExpired,
    RegistrationThrottled,
    RunnerBusy,
    RunnerExists,
    ScaleSetGone,
    SessionConflict,
    SessionGone,
)
from rungar.github.http import Response
from rungar.github.ratelimit import budget_wait, is_rate_limited, retry_after
from rungar.github.transport import USER_AGENT, Transport
from rungar.github.urls import GitHubTarget
from rungar.github.wire import (
    JitConfig,
    Message,
    RunnerGroup,
    RunnerReference,
    ScaleSet,
    Session,
    list_answer,
    list_values,
    scale_set_labels,
)

API_VERSION = "6.0-preview"
LONG_POLL_TIMEOUT = 70.0  # the service holds a poll ~50 s; a hung connection is cut after this
AGENTS = "_apis/distributedtask/pools/0/agents"
SCALE_SETS = "_apis/runtime/runnerscalesets"


HOLDER = re.compile(r"active session for owner (?P<owner>\S(?:.*\S)?)\s*$")


def session_holder(message: str) -> str:
    """The owner a 409 on session create names ("The runner scale set 7 already has an active
    session for owner host-b/4242."), or "" when it names none."""
    found = HOLDER.search(message)
    return found.group("owner").rstrip(".") if found else ""


def _type_name(response: Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return ""
    return str(body.get("typeName", "")) if isinstance(body, dict) else ""


def with_query(url: str, extra: Mapping[str, str]) -> str:
    """``url`` with ``extra`` added to its query, keeping what is there (MQ URLs are opaque)."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in extra]
    query.extend(extra.items())
    return urlunsplit(parts._replace(query=urlencode(query)))


def with_path_suffix(url: str, suffix: str) -> str:
    """``url`` with ``/suffix`` added to the path and the query kept (the MQ ack URL)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/" + suffix))


class ScaleSetClient:
    def __init__(
        self,
        target: GitHubTarget,
        tokens: TokenSource,
        transport: Transport,
        admin: AdminChain,
        *,
        user_agent: str = USER_AGENT,
        long_poll_timeout: float = LONG_POLL_TIMEOUT,
    ) -> None:
        self.target = target
        self._tokens = tokens
        self._transport = transport
        self._admin = admin
        self._user_agent = user_agent
        self._long_poll_timeout = long_poll_timeout
        # The last answer of each conditional read, by URL path and query, with its ETag.
        self._etags: dict[str, tuple[str, Response]] = {}
        self.not_modified = 0  # 304 answers: reads that cost nothing

    @property
    def transport(self) -> Transport:
        return self._transport

    # ---- plumbing -------------------------------------------------------------------------

    async def _rest(
        self, method: str, path: str, body: Any = None, extra: Mapping[str, str] | None = None
    ) -> Response:
        url = f"{self.target.rest_base}/{path}"
        for attempt in range(2):
            headers = {
                "Authorization": f"Bearer {await self._tokens.token()}",
                "Accept": REST_ACCEPT,
                "User-Agent": self._user_agent,
                **(extra or {}),
            }
            response = await self._transport.request(
                method, url, headers=headers, json_body=body, rest=True
            )
            if response.status == 401 and attempt == 0:
                self._tokens.invalidate()
                continue
            return response
        raise AssertionError("unreachable")

    async def rest(
        self, method: str, path: str, body: Any = None, headers: Mapping[str, str] | None = None
    ) -> Response:
        """A REST call under ``rest_base`` (``repos/o/r/...``): the token, the Accept header, a
        401 refreshing the credential once; for the REST routes other modules speak
        (:mod:`rungar.github.checks`, :mod:`rungar.github.releases`). ``headers`` are added
        (``If-None-Match``)."""
        return await self._rest(method, path, body, headers)

    def checked_object(
        self, response: Response, what: str, ok: tuple[int, ...] = (200,)
    ) -> dict[str, Any]:
        """The answer's JSON object, or a GitHubError naming ``what`` and the status."""
        return self._object(response, what, ok)

    async def _call(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        rate_limits: bool = True,
    ) -> Response:
        """An ADMIN call: api-version added, 401 re-runs the whole auth chain and retries once."""
        query = dict(params or {})
        query.setdefault("api-version", API_VERSION)
        for attempt in range(2):
            conn = await self._admin.get()
            extra = headers
            headers = {
                "Authorization": f"Bearer {conn.token}",
                "Content-Type": "application/json",
                "User-Agent": self._user_agent,
                **(extra or {}),
            }
            response = await self._transport.request(
                method,
                conn.url + path,
                headers=headers,
                params=query,
                json_body=body,
                rate_limits=rate_limits,
            )
            if response.status == 401 and attempt == 0:
                self._admin.invalidate()
                continue
            return response
        raise AssertionError("unreachable")

    async def _read(self, path: str, *, params: Mapping[str, str] | None = None) -> Response:
        """A conditional ADMIN read: ``If-None-Match`` with the ETag of the last answer, and a
        304 (which GitHub does not count against any budget) answered from that answer."""
        key = path + "?" + urlencode(sorted((params or {}).items()))
        known = self._etags.get(key)
        headers = {"If-None-Match": known[0]} if known is not None else None
        r = await self._call("GET", path, params=params, headers=headers)
        if r.status == 304 and known is not None:
            self.not_modified += 1
            return known[1]
        etag = r.headers.get("etag", "")
        if r.status == 200 and etag:
            self._etags[key] = (etag, r)
        else:
            self._etags.pop(key, None)
        return r

    async def rate_limit(self) -> None:
        """``GET /rate_limit``: the REST budget, read into the transport; it costs nothing.
        Not asked while the last reading says the budget is spent (nothing new until reset)."""
        transport = self._transport
        if budget_wait(transport.rate_limit, transport.clock.now()) > 0:
            return
        await self._rest("GET", "rate_limit")

    @staticmethod
    def _fail(response: Response, what: str) -> GitHubError:
        return GitHubError(
            f"{what}: HTTP {response.status}: {error_message(response)}", response.status
        )

    def _object(
        self, response: Response, what: str, ok: tuple[int, ...] = (200,)
    ) -> dict[str, Any]:
        if response.status not in ok:
            raise self._fail(response, what)
        try:
            body = response.json()
        except ValueError as e:
            raise GitHubError(f"{what}: answer is not JSON", response.status) from e
        if not isinstance(body, dict):
            raise GitHubError(f"{what}: answer is not a JSON object", response.status)
        return body

    # ---- runner groups and scale sets (A1–A7) ---------------------------------------------

    async def get_runner_group_by_name(self, name: str) -> RunnerGroup:
        """A1. ``Default`` is group 1 without asking, as ARC does."""
        if name.lower() == "default":
            return RunnerGroup(1, "Default", True)
        r = await self._call("GET", "_apis/runtime/runnergroups/", params={"groupName": name})
        count, groups = list_answer(self._object(r, "get runner group"))
        if count != 1 or not groups:
            found = "no" if not count else str(count)
            many = "group" if count == 1 else "groups"
            raise GitHubError(f"runner group {name!r}: {found} {many} of that name", r.status)
        return RunnerGroup.from_json(groups[0])

    async def get_scale_set(self, runner_group_id: int, name: str) -> ScaleSet | None:
        """A2."""
        params = {"runnerGroupId": str(runner_group_id), "name": name}
        r = await self._read(SCALE_SETS, params=params)
        count, found = list_answer(self._object(r, "get scale set"))
        if count > 1:
            raise GitHubError(f"scale set {name!r}: {count} scale sets of that name", r.status)
        return ScaleSet.from_json(found[0]) if found else None

    async def get_scale_set_by_id(self, scale_set_id: int) -> ScaleSet | None:
        """A3; None when GitHub no longer has it."""
        r = await self._read(f"{SCALE_SETS}/{scale_set_id}")
        if r.status == 404:
            return None
        return ScaleSet.from_json(self._object(r, "get scale set"))

    async def list_scale_sets(self) -> list[ScaleSet]:
        """A4."""
        r = await self._call("GET", SCALE_SETS)
        return [ScaleSet.from_json(v) for v in list_values(self._object(r, "list scale sets"))]

    async def create_scale_set(
        self, name: str, runner_group_id: int, labels: Sequence[str]
    ) -> ScaleSet:
        """A5 (answers 200, not 201)."""
        body = {
            "name": name,
            "runnerGroupId": runner_group_id,
            "labels": scale_set_labels(name, list(labels)),
            "RunnerSetting": {"ephemeral": True, "disableUpdate": True},
        }
        r = await self._call("POST", SCALE_SETS, body=body)
        return ScaleSet.from_json(self._object(r, "create scale set", (200, 201)))

    async def update_scale_set(self, scale_set_id: int, changes: Mapping[str, Any]) -> ScaleSet:
        """A6, with a partial scale set such as ``{"runnerGroupId": 2}``."""
        r = await self._call("PATCH", f"{SCALE_SETS}/{scale_set_id}", body=dict(changes))
        if r.status == 404:
            raise ScaleSetGone(f"scale set {scale_set_id} is gone", 404)
        return ScaleSet.from_json(self._object(r, "update scale set"))

    async def delete_scale_set(self, scale_set_id: int) -> None:
        """A7; an already deleted scale set is fine."""
        r = await self._call("DELETE", f"{SCALE_SETS}/{scale_set_id}")
        if r.status not in (204, 404):
            raise self._fail(r, "delete scale set")

    # ---- sessions (A8–A10) ------------------------------------------------------------------

    async def create_session(self, scale_set_id: int, owner_name: str) -> Session:
        """A8. Raises SessionConflict (409) and ScaleSetGone (404)."""
        r = await self._call(
            "POST", f"{SCALE_SETS}/{scale_set_id}/sessions", body={"ownerName": owner_name}
        )
        if r.status == 409:
            holder = session_holder(error_message(r))
            held = f" for owner {holder}" if holder else ""
            raise SessionConflict(
                f"scale set {scale_set_id} already has an active session{held}", 409, holder
            )
        if r.status == 404:
            raise ScaleSetGone(f"scale set {scale_set_id} is gone: {error_message(r)}", 404)
        session = Session.from_json(self._object(r, "create session"))
        return _checked(session, r)

    async def refresh_session(self, scale_set_id: int, session_id: str) -> Session:
        """A9: a new message-queue token. Raises SessionGone when the service evicted it."""
        r = await self._call("PATCH", f"{SCALE_SETS}/{scale_set_id}/sessions/{session_id}")
        if r.status == 404:
            if "RunnerScaleSetNotFound" in _type_name(r):
                raise ScaleSetGone(f"scale set {scale_set_id} is gone", 404)
            raise SessionGone(
                f"session of scale set {scale_set_id} is gone: {error_message(r)}", 404
            )
        return _checked(Session.from_json(self._object(r, "refresh session")), r)

    async def delete_session(self, scale_set_id: int, session_id: str) -> None:
        """A10; a session the service already forgot (400 SessionExpired, 404) is fine."""
        r = await self._call("DELETE", f"{SCALE_SETS}/{scale_set_id}/sessions/{session_id}")
        if r.status not in (200, 204, 400, 404):
            raise self._fail(r, "delete session")

    # ---- the message queue and acquiring (A11, A12) ------------------------------------

    def _mq_headers(self, session: Session) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {session.message_queue_token}",
            "Accept": f"application/json; api-version={API_VERSION}",
            "User-Agent": self._user_agent,
        }

    async def get_message(
        self, session: Session, last_message_id: int, max_capacity: int
    ) -> Message | None:
        """One long poll: None on 202 and on a cut poll. A 200 whose body is empty or not a
        message raises :class:`GarbledAnswer` (ARC #4285, #4470): it is no answer, and reading
        it as "no message" made the listener poll again at once, hundreds of times a second."""
        url = session.message_queue_url
        if last_message_id > 0:
            url = with_query(url, {"lastMessageId": str(last_message_id)})
        headers = self._mq_headers(session) | {"X-ScaleSetMaxCapacity": str(max(0, max_capacity))}
        try:
            r = await self._transport.request(
                "GET", url, headers=headers, timeout=self._long_poll_timeout
            )
        except GitHubError as e:
            if e.status is None:  # timeouts and resets: a poll that produced nothing
                return None
            raise
        if r.status == 202:
            return None
        if r.status == 200 and not r.body.strip(b"\xef\xbb\xbf \r\n\t"):
            raise GarbledAnswer("message queue answered 200 with an empty body", 200)
        if r.status == 401:
            raise MessageQueueTokenExpired("message queue token refused", 401)
        if r.status == 404:
            raise SessionGone(f"message queue answered 404: {error_message(r)}", 404)
        try:
            return Message.from_json(self._object(r, "get message"))
        except GitHubError as e:
            if r.status == 200:
                raise GarbledAnswer(f"message queue answered 200 with {e}", 200) from e
            raise

    async def delete_message(self, session: Session, message_id: int) -> None:
        """Ack. 404 (already gone) is fine."""
        url = with_path_suffix(session.message_queue_url, str(message_id))
        headers = self._mq_headers(session) | {"Content-Type": "application/json"}
        r = await self._transport.request("DELETE", url, headers=headers)
        if r.status == 401:
            raise MessageQueueTokenExpired("message queue token refused", 401)
        if r.status not in (200, 204, 404):
            raise self._fail(r, "delete message")

    async def acquire_jobs(
        self, scale_set_id: int, session: Session, request_ids: Sequence[int]
    ) -> list[int]:
        """A12, authenticated with the *message-queue* token; the ids actually acquired."""
        conn = await self._admin.get()
        url = with_query(
            f"{conn.url}{SCALE_SETS}/{scale_set_id}/acquirejobs", {"api-version": API_VERSION}
        )
        headers = self._mq_headers(session) | {"Content-Type": "application/json"}
        r = await self._transport.request(
            "POST", url, headers=headers, content=json.dumps(list(request_ids)).encode()
        )
        if r.status == 401:
            raise MessageQueueTokenExpired("acquire refused the message queue token", 401)
        if r.status == 404:
            raise ScaleSetGone(f"scale set {scale_set_id} is gone", 404)
        values = self._object(r, "acquire jobs").get("value")
        return [int(v) for v in values if isinstance(v, int)] if isinstance(values, list) else []

    # ---- runners (A13–A17) ----------------------------------------------------------------

    async def generate_jit_config(
        self, scale_set_id: int, name: str, work_folder: str = ""
    ) -> JitConfig:
        """A13. Raises RunnerExists on 409, ScaleSetGone on 404."""
        body = {"name": name, "workFolder": work_folder}
        r = await self._call(
            "POST", f"{SCALE_SETS}/{scale_set_id}/generatejitconfig", body=body, rate_limits=False
        )
        if is_rate_limited(r.status, r.headers, r.body):
            after = retry_after(r.headers, self._transport.clock.now())
            raise RegistrationThrottled(
                f"generate jit config: HTTP {r.status}: GitHub's registration limit",
                r.status,
                after if after is not None else 1.0,
            )
        if r.status == 409:
            raise RunnerExists(f"a runner named {name!r} already exists", 409)
        if r.status == 404:
            raise ScaleSetGone(f"scale set {scale_set_id} is gone", 404)
        config = JitConfig.from_json(self._object(r, "generate jit config", (200, 201)))
        if not config.encoded or not config.runner.id:
            raise GitHubError(
                "generate jit config: answer lacks the runner or its config", r.status
            )
        return config

    async def get_runner_by_name(self, name: str) -> RunnerReference | None:
        """A15. Several runners of one name is an error: which one to remove or trust is unknown."""
        r = await self._call("GET", AGENTS, params={"agentName": name})
        count, found = list_answer(self._object(r, "get runner by name"))
        if count > 1:
            raise GitHubError(f"runner {name!r}: {count} runners of that name", r.status)
        return RunnerReference.from_json(found[0]) if found else None

    async def list_runners(self) -> list[RunnerReference]:
        """A16, conditional: an unchanged list answers 304."""
        r = await self._read(AGENTS)
        return [RunnerReference.from_json(v) for v in list_values(self._object(r, "list runners"))]

    async def remove_runner(self, runner_id: int) -> None:
        """A17. Raises RunnerBusy on 400 JobStillRunning; a runner already gone is success."""
        r = await self._call("DELETE", f"{AGENTS}/{runner_id}")
        if r.status in (200, 204, 404):
            return
        if r.status == 400 and "JobStillRunning" in _type_name(r):
            raise RunnerBusy(f"runner {runner_id} is running a job", 400)
        raise self._fail(r, "remove runner")

    # ---- re-running a job (REST) ---------------------------------------------------------

    async def rerun_failed_job(self, repository: str, run_id: str, runner_name: str) -> int:
        """Re-run the job of ``run_id`` that failed on ``runner_name``: the run's jobs are
        listed to find its id (the message queue does not carry it), then the job's re-run
        route is called. Needs ``actions: write`` on the repository. The re-run job's id."""
        base = f"repos/{repository}/actions"
        listed = await self._rest("GET", f"{base}/runs/{run_id}/jobs?filter=latest&per_page=100")
        jobs = self._object(listed, "list the run's jobs").get("jobs")
        found = [
            j
            for j in (jobs if isinstance(jobs, list) else [])
            if isinstance(j, dict)
            and j.get("runner_name") == runner_name
            and j.get("conclusion") == "failure"
        ]
        if not found:
            raise GitHubError(
                f"run {run_id} of {repository} has no job that failed on {runner_name}", 404
            )
        job_id = int(found[0].get("id", 0))
        r = await self._rest("POST", f"{base}/jobs/{job_id}/rerun", {})
        if r.status != 201:
            raise self._fail(r, f"re-run job {job_id}")
        return job_id

    # ---- REST extras (R4, R5) -------------------------------------------------------------

    async def generate_rest_jit_config(
        self, name: str, runner_group_id: int, labels: Sequence[str], work_folder: str = "_work"
    ) -> JitConfig:
        """R4: a JIT runner outside any scale set (webhook-driven pools)."""
        body = {
            "name": name,
            "runner_group_id": runner_group_id,
            "labels": list(labels),
            "work_folder": work_folder,
        }
        r = await self._rest(
            "POST", f"{self.target.scope_path}/actions/runners/generate-jitconfig", body
        )
        if r.status == 409:
            raise RunnerExists(f"a runner named {name!r} already exists", 409)
        return JitConfig.from_json(self._object(r, "generate jit config (REST)", (201,)))


def _checked(session: Session, r: Response) -> Session:
    """An empty queue URL or token was seen in an incident (ARC #4370): treat as transient."""
    if not session.session_id or not session.message_queue_url or not session.message_queue_token:
        raise GitHubError("session answer lacks its id, queue URL or token", r.status)
    return session
