"""The ``workflow_job`` webhook receiver (docs/github.md).

Webhooks are a hint that wakes scale sets early; the listener's statistics stay the truth. So the
receiver is strict and cheap: it refuses to start without a secret; refuses a body over the
limit (413) before reading it all; checks ``X-Hub-Signature-256`` (``sha256=`` + lower-case hex
HMAC of the exact bytes) in constant time *before* parsing anything; drops a repeated
``X-GitHub-Delivery`` (GitHub reuses it on redelivery, and replays carry no timestamp); answers
2xx at once; and for a ``queued`` job wakes every scale set whose labels contain all the job's
labels (``self-hosted`` ignored, case-insensitive). ``waiting``, ``in_progress`` and ``completed``
never provision (runs-on #539, ARC #2118).

The body is parsed only after a depth check (:func:`json_depth_ok`): Python's parser recurses
once per level, so a signed body of 20,000 nested brackets would otherwise raise
``RecursionError``. Anything unparseable is a 400 counted ``malformed``. Every request is
counted under exactly one outcome; those the HTTP layer refuses before this receiver sees them
(timeouts, the connection cap, a client gone mid-body) are counted by the listener
(:mod:`rungar.web.bounded`) through the same ``on_outcome``.

A delivery replayed under a *new* ``X-GitHub-Delivery`` is accepted: GitHub's signature covers
the body only, so a copy cannot be told from a new delivery. What bounds it: a delivery only
wakes scale sets early, and each scale set still creates no more runners than the jobs GitHub's
own statistics show and its ``max_runners``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from itertools import accumulate
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from rungar.errors import ConfigError

log = structlog.get_logger("rungar.github")

MAX_BODY_BYTES = 1024 * 1024  # workflow_job payloads are a few KiB; GitHub's own cap is 25 MB
SEEN_DELIVERIES = 10_000
MAX_JSON_DEPTH = 64  # a workflow_job payload nests about 5 deep
PREFIX = "sha256="
WEBHOOK_PATH = "/webhook"

# The outcomes a request is counted under (``rungar_webhook_deliveries{outcome=...}``).
OUTCOMES = (
    "accepted",
    "ping",
    "ignored",
    "duplicate",
    "bad_signature",
    "malformed",
    "too_large",
    "not_found",
    "bad_method",
    "client_gone",
    "timeout",
    "busy",
    "bad_request",
    "error",
)
# A string, or an unterminated one to the end of the body: every match attempt succeeds, so
# no quote is tried twice and the scan stays linear whatever the body holds.
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*+(?:"|\Z)', re.DOTALL)
_DEPTH_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}

Wake = Callable[[Sequence[str], "WorkflowJob"], None]
# Told each delivery's outcome: the daemon's metrics count them.
DeliveryCallback = Callable[[str], None]


class WorkflowJobBody(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: int
    labels: list[str] = []
    name: str = ""
    run_id: int = 0
    runner_name: str | None = None


class Repository(BaseModel):
    model_config = ConfigDict(extra="ignore")
    full_name: str = ""


class WorkflowJob(BaseModel):
    """The part of a ``workflow_job`` delivery Rungar reads; untrusted input, so pydantic."""

    model_config = ConfigDict(extra="ignore")
    action: str
    workflow_job: WorkflowJobBody
    repository: Repository = Repository()


def signature_ok(secret: bytes, body: bytes, header: str | None) -> bool:
    """Constant-time check of ``X-Hub-Signature-256``; SHA-1 and other prefixes are refused."""
    if not header or not header.startswith(PREFIX):
        return False
    expected = PREFIX + hmac.new(secret, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), header.encode("utf-8", "replace"))


def json_depth_ok(body: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether no array or object in ``body`` nests deeper than ``limit``, checked without
    recursion: brackets inside strings are dropped, then the running depth is summed in C."""
    brackets = _STRING.sub(b"", body).translate(None, delete=_NOT_BRACKETS)
    if not brackets:
        return True
    return max(accumulate(map(_DEPTH_STEP.__getitem__, brackets))) <= limit


_NOT_BRACKETS = bytes(b for b in range(256) if b not in _DEPTH_STEP)


def matching_scale_sets(
    job_labels: Sequence[str], scale_sets: Mapping[str, Sequence[str]]
) -> list[str]:
    """Scale sets whose labels include every job label but ``self-hosted`` (case-insensitive)."""
    wanted = {x.lower() for x in job_labels if x.lower() != "self-hosted"}
    return [
        name
        for name, labels in scale_sets.items()
        if wanted <= ({x.lower() for x in labels} | {name.lower()})
    ]


class WebhookReceiver:
    def __init__(
        self,
        secret: str,
        scale_sets: Mapping[str, Sequence[str]],
        wake: Wake,
        *,
        max_body: int = MAX_BODY_BYTES,
        on_outcome: DeliveryCallback | None = None,
        path: str = WEBHOOK_PATH,
        max_depth: int = MAX_JSON_DEPTH,
    ) -> None:
        if not secret:
            raise ConfigError(
                ["webhook: a secret is required; refusing to accept unsigned deliveries"]
            )
        self._secret = secret.encode()
        self.scale_sets = dict(scale_sets)
        self._wake = wake
        self._max_body = max_body
        self._max_depth = max_depth
        self.path = path
        self._seen: OrderedDict[str, None] = OrderedDict()
        self.counts: dict[str, int] = {}
        self._on_outcome = on_outcome

    def count(self, outcome: str) -> None:
        """Count one request under ``outcome``; the listener calls it for its own refusals."""
        self._count(outcome)

    def _count(self, outcome: str) -> None:
        self.counts[outcome] = self.counts.get(outcome, 0) + 1
        if self._on_outcome is not None:
            self._on_outcome(outcome)

    async def _read(self, request: Request) -> bytes | None:
        """The body, or None when it is over the limit (read no further than the limit)."""
        declared = request.headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self._max_body):
            return None
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > self._max_body:
                return None
            chunks.append(chunk)
        return b"".join(chunks)

    def _duplicate(self, delivery: str) -> bool:
        if not delivery:
            return False
        if delivery in self._seen:
            return True
        self._seen[delivery] = None
        while len(self._seen) > SEEN_DELIVERIES:
            self._seen.popitem(last=False)
        return False

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """The receiver as an ASGI app: ``POST`` to its path, every other request refused."""
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        response = await self.route(request)
        if response is not None:
            await response(scope, receive, send)

    async def route(self, request: Request) -> Response | None:
        if request.url.path != self.path:
            self._count("not_found")
            return JSONResponse({"error": f"not found; deliveries go to {self.path}"}, 404)
        if request.method != "POST":
            self._count("bad_method")
            return JSONResponse({"error": "deliveries are POSTed"}, 405, {"allow": "POST"})
        return await self.handle(request)

    async def handle(self, request: Request) -> Response | None:
        """The answer to one delivery; None when the sender went away before its body came
        (the listener counts that, since it knows whether the sender left or was cut off)."""
        try:
            body = await self._read(request)
        except ClientDisconnect:
            return None
        if body is None:
            self._count("too_large")
            return JSONResponse({"error": "payload too large"}, status_code=413)
        if not signature_ok(self._secret, body, request.headers.get("x-hub-signature-256")):
            self._count("bad_signature")
            return JSONResponse({"error": "signature missing or wrong"}, status_code=401)
        if self._duplicate(request.headers.get("x-github-delivery", "")):
            self._count("duplicate")
            return JSONResponse({"status": "duplicate delivery ignored"}, status_code=200)
        event = request.headers.get("x-github-event", "")
        if event == "ping":
            self._count("ping")
            return JSONResponse({"status": "pong"}, status_code=200)
        if event != "workflow_job":
            self._count("ignored")
            return JSONResponse({"status": "event ignored"}, status_code=202)
        try:
            if not json_depth_ok(body, self._max_depth):
                raise ValueError("nested too deeply")
            job = WorkflowJob.model_validate(json.loads(body))
        except (ValueError, ValidationError, RecursionError):
            self._count("malformed")
            return JSONResponse({"error": "not a workflow_job payload"}, status_code=400)
        self._count("accepted")
        if job.action == "queued":
            targets = matching_scale_sets(job.workflow_job.labels, self.scale_sets)
            if targets:
                try:
                    self._wake(targets, job)
                except Exception as e:  # the sender must get its 2xx whatever the engine does
                    log.error("webhook.wake_failed", error=str(e))
            log.info("webhook.job_queued", job_id=job.workflow_job.id, scale_sets=targets)
        return JSONResponse({"status": "accepted"}, status_code=202)
