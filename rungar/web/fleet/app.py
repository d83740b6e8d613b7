"""The fleet page's routes, and who may see them.

``/`` the page; ``/static/…`` its script, style and the vendored uPlot; ``/api/status`` the
latest status document; ``/api/stream`` the live view as server-sent events; ``/api/usage``
the Usage tab's numbers (``rungar usage``'s document). Everything runs on the listener's loop;
the engine is asked only by the feed's sampler, and the state database is read on a worker
thread with a connection of its own.

With a ``token_file`` every request must carry the token: ``Authorization: Bearer TOKEN``, or
``?token=TOKEN`` in the page's address once, after which the page's own requests carry it in
a cookie (HttpOnly, SameSite=Strict, Secure over TLS). A wrong or missing token is 401, and the
token never appears in a log line.
"""

from __future__ import annotations

import asyncio
import hmac
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from rungar.web.bounded import Message, Receive, Scope, Send
from rungar.web.fleet.feed import Feed

COOKIE = "rungar_dashboard"
VENDOR = Path(__file__).resolve().parent.parent / "static" / "vendor" / "uplot"
STATIC = Path(__file__).resolve().parent / "static"
FILES: dict[str, tuple[Path, str]] = {
    "/static/fleet.js": (STATIC / "fleet.js", "text/javascript; charset=utf-8"),
    "/static/fleet.css": (STATIC / "fleet.css", "text/css; charset=utf-8"),
    "/static/uplot/uPlot.iife.min.js": (
        VENDOR / "uPlot.iife.min.js",
        "text/javascript; charset=utf-8",
    ),
    "/static/uplot/uPlot.min.css": (VENDOR / "uPlot.min.css", "text/css; charset=utf-8"),
}
SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (
        b"content-security-policy",
        b"default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:",
    ),
]
USAGE_BY = ("repository", "workflow", "scale-set", "provider")
USAGE_SINCE_MAX = 400 * 86400.0

UsageReader = Callable[[str, float], dict[str, Any]]  # (by, since) -> rungar usage's document


class FleetApp:
    """A plain ASGI app: a handful of routes need no framework, and the live stream owns its
    connection (it ends when a write to the page fails, or when the feed closes it)."""

    def __init__(
        self,
        feed: Feed,
        usage: UsageReader,
        *,
        token: str = "",
        secure: bool = False,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.feed = feed
        self.usage = usage
        self.token = token
        self.secure = secure
        self.now = now
        self._files = {path: (file.read_bytes(), kind) for path, (file, kind) in FILES.items()}
        self._page = resources.files("rungar.web.fleet").joinpath("page.html").read_bytes()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        if method not in ("GET", "HEAD"):
            await answer(send, 405, b"method not allowed\n")
            return
        query = parse_query(scope.get("query_string", b""))
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        cookie = ""
        if self.token:
            given, cookie = self._token_given(headers, query)
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                await answer(send, 401, b"a token is needed: Authorization: Bearer, or ?token=\n")
                return
        extra = [(b"set-cookie", cookie.encode())] if cookie else []
        if path == "/":
            await answer(send, 200, self._page, "text/html; charset=utf-8", extra)
        elif path in self._files:
            body, kind = self._files[path]
            await answer(send, 200, body, kind, [(b"cache-control", b"max-age=300")])
        elif path == "/api/status":
            await self.feed.ready()
            await answer_json(send, self.feed.latest or {})
        elif path == "/api/stream":
            await self.stream(send)
        elif path == "/api/usage":
            await self.usage_answer(send, query)
        else:
            await answer(send, 404, b"not found\n")

    def _token_given(self, headers: dict[str, str], query: dict[str, str]) -> tuple[str, str]:
        """The token the request carries, and a cookie to set when it came in the address."""
        bearer = headers.get("authorization", "")
        if bearer.lower().startswith("bearer "):
            return bearer[7:].strip(), ""
        if "token" in query:
            flags = "; HttpOnly; SameSite=Strict; Path=/" + ("; Secure" if self.secure else "")
            return query["token"], f"{COOKIE}={query['token']}{flags}"
        for part in headers.get("cookie", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == COOKIE:
                return value, ""
        return "", ""

    async def stream(self, send: Send) -> None:
        await self.feed.ready()
        queue = self.feed.open_stream()
        if queue is None:
            await answer(send, 503, b"too many live views open; try again later\n")
            return
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [
                        (b"content-type", b"text/event-stream"),
                        (b"cache-control", b"no-store"),
                        *SECURITY_HEADERS,
                    ],
                }
            )
            while (data := await queue.get()) is not None:
                await send({"type": "http.response.body", "body": data, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            self.feed.close_stream(queue)

    async def usage_answer(self, send: Send, query: dict[str, str]) -> None:
        from rungar.model.units import parse_duration

        by = query.get("by", "repository")
        try:
            window = parse_duration(query.get("since", "7d"))
        except ValueError as e:
            await answer(send, 400, f"since: {e}\n".encode())
            return
        if by not in USAGE_BY or not 0 < window <= USAGE_SINCE_MAX:
            await answer(
                send,
                400,
                b"by: repository, workflow, scale-set or provider; since: a duration up to 400d\n",
            )
            return
        document = await asyncio.to_thread(self.usage, by, self.now() - window)
        await answer_json(send, document)


def parse_query(raw: bytes) -> dict[str, str]:
    from urllib.parse import parse_qsl

    return dict(parse_qsl(raw.decode("latin-1"), max_num_fields=16))


async def answer(
    send: Send,
    status: int,
    body: bytes,
    kind: str = "text/plain; charset=utf-8",
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    start: Message = {
        "type": "http.response.start",
        "status": status,
        "headers": [
            (b"content-type", kind.encode()),
            (b"content-length", str(len(body)).encode()),
            *SECURITY_HEADERS,
            *(extra or []),
        ],
    }
    await send(start)
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def answer_json(send: Send, document: dict[str, Any]) -> None:
    import json

    body = json.dumps(document, default=str).encode()
    await answer(send, 200, body, "application/json", [(b"cache-control", b"no-store")])
