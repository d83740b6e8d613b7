"""Shared plumbing of the emulator's routes: the request log, faults, auth headers, answers."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import math
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from rungar.testing.github_emulator.faults import FaultKind, exception_body
from rungar.testing.github_emulator.state import EmulatorState

BOM = b"\xef\xbb\xbf"
Handler = Callable[[Request], Awaitable[Response]]
_request_ids = itertools.count(1)


class CollapseSlashes:
    """ASGI: ``//`` in a path is read as ``/``, as the service reads it. Clients join the admin
    URL (ending in ``/``) with paths that may start with one, and GitHub accepts the result."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") == "http" and "//" in scope.get("path", ""):
            path = scope["path"]
            while "//" in path:
                path = path.replace("//", "/")
            scope = dict(scope, path=path, raw_path=path.encode())
        await self.app(scope, receive, send)


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return JSONResponse(data, status_code=status, headers=headers)


def error(status: int, type_name: str, message: str = "") -> Response:
    return json_response(exception_body(type_name, message), status)


def bearer(request: Request, scheme: str = "Bearer") -> str:
    value = request.headers.get("authorization", "")
    prefix = scheme + " "
    return value[len(prefix) :].strip() if value.startswith(prefix) else ""


async def body_json(request: Request) -> Any:
    raw = await request.body()
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def client_of(state: EmulatorState, request: Request) -> dict[str, str]:
    """Which client made a request: its User-Agent, and the message session it acts in (from
    the session path, the queue URL's ``sessionId`` or its message-queue token), or ""."""
    session = (
        str(request.path_params.get("sid", ""))
        or request.query_params.get("sessionId", "")
        or state.tokens.session_of(bearer(request))
    )
    return {"userAgent": request.headers.get("user-agent", ""), "sessionId": session}


def bearer_any(request: Request) -> str:
    """The credential of ``Authorization`` whatever its scheme (Bearer, token, RemoteAuth)."""
    value = request.headers.get("authorization", "")
    return value.split(" ", 1)[1].strip() if " " in value else ""


def etag_of(body: bytes) -> str:
    return '"' + hashlib.sha1(body, usedforsecurity=False).hexdigest() + '"'


def conditional(request: Request, answer: Response) -> Response:
    """Every 200 to a GET carries an ETag; a request whose ``If-None-Match`` names it gets 304
    with no body, as GitHub answers conditional requests."""
    etag = etag_of(bytes(answer.body))
    if request.headers.get("if-none-match", "") == etag:
        headers = {k: v for k, v in answer.headers.items() if k.lower() not in _BODY_HEADERS}
        return Response(status_code=304, headers={**headers, "ETag": etag})
    answer.headers["ETag"] = etag
    return answer


_BODY_HEADERS = frozenset({"content-length", "content-type"})


def route(
    state: EmulatorState,
    names: str | dict[str, str] | Callable[[Request], str],
    handler: Handler,
) -> Handler:
    """Log the request (and, once answered, its status), apply a matching fault, then run
    ``handler``.

    ``names`` is the spec's route name, one per method where a path serves several (A3/A6/A7),
    or a function of the request where the query tells them apart (A15/A16).
    """

    async def wrapped(request: Request) -> Response:
        if isinstance(names, str):
            name = names
        elif isinstance(names, dict):
            name = names[request.method]
        else:
            name = names(request)
        body = await request.body()
        entry: dict[str, Any] = {
            "route": name,
            "method": request.method,
            "path": request.url.path,
            "query": dict(request.query_params),
            "headers": dict(request.headers),
            "body": body.decode("utf-8", "replace"),
            "at": state.clock.now(),
            "client": client_of(state, request),
            # The TCP peer, host:port: through a proxy it is the proxy's outgoing connection.
            "peer": f"{request.client.host}:{request.client.port}" if request.client else "",
            "status": 0,  # until answered: a long poll is logged when it starts
        }
        state.requests.append(entry)
        answer = await _answer(state, handler, request, name)
        if request.method == "GET" and answer.status_code == 200:
            answer = conditional(request, answer)
        entry["status"] = answer.status_code
        # Every answer of the service names itself, for support tickets and logs.
        answer.headers["X-GitHub-Request-Id"] = f"EMU0:{next(_request_ids):08X}"
        return answer

    return wrapped


async def _answer(state: EmulatorState, handler: Handler, request: Request, name: str) -> Response:
    """The handler's answer, or the throttle's or a scripted fault's in its place."""
    throttle = state.faults.throttle_of(name)
    wait = None
    if throttle is not None:  # GitHub's registration limit: each installation's own
        wait = throttle.check(state.clock.now(), state.tokens.caller_of(bearer_any(request)))
    if wait is not None:
        # GitHub's secondary limit answer: 429, Retry-After in whole seconds.
        return json_response(
            {
                "message": "You have exceeded a secondary rate limit. Please wait a few "
                "minutes before you try again.",
            },
            429,
            {"Retry-After": str(max(1, math.ceil(wait)))},
        )
    fault = state.faults.take(name, request.method)
    if fault is None:
        return await handler(request)
    if fault.kind is FaultKind.STATUS:
        content = (
            exception_body(fault.type_name, fault.message)
            if fault.type_name or fault.message
            else {}
        )
        return json_response(content, fault.status, fault.headers or None)
    if fault.kind is FaultKind.EMPTY:
        return Response(b"", 200, media_type="application/json")
    if fault.kind is FaultKind.GARBLED:
        return Response(b'{"messageId": 1, "messageTy', 200, media_type="application/json")
    if fault.kind is FaultKind.HANG:
        await asyncio.sleep(fault.delay or 3600.0)
        return Response(b"", 504)
    if fault.kind is FaultKind.DELAY:
        await asyncio.sleep(fault.delay)
    answer = await handler(request)
    if fault.kind in (FaultKind.NO_STATISTICS, FaultKind.UNKNOWN_TYPE):
        data = json.loads(bytes(answer.body)) if answer.status_code == 200 else None
        if not isinstance(data, dict) or "statistics" not in data:
            state.faults.give_back(fault, name)  # a 202 has no message to change
            return answer
        if fault.kind is FaultKind.NO_STATISTICS:
            del data["statistics"]
        else:
            data["messageType"] = "RunnerScaleSetFutureMessages"
        return json_response(data, 200)
    if fault.kind is FaultKind.BOM:
        headers = {k: v for k, v in answer.headers.items() if k.lower() != "content-length"}
        return Response(BOM + bytes(answer.body), answer.status_code, headers=headers)
    return answer
