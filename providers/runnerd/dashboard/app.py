"""The dashboard's routes: four pages, their JSON, the live stream, the config editor's save.

Access: beyond loopback the TLS listener has already asked for a client certificate
(``tls_ca``), or every request must carry the bearer token of ``token_file``; on loopback,
runnerd's own token (``state_dir/dashboard.token``, which ``runnerctl dashboard`` prints as a
login link). A request carries it as an ``Authorization`` header, or as the cookie a browser is
given by opening any page once with ``?token=...``.

A write (the editor's save) needs the same access as the pages and, against cross-site
requests, the header ``X-Runnerd-Dashboard: 1`` (which a cross-site form cannot send, and a
cross-site script may not without a CORS answer it never gets) and, when the browser sends an
``Origin``, this site's.
"""

from __future__ import annotations

import asyncio
import hmac
import html
import json
from collections.abc import AsyncIterator
from pathlib import Path
from string import Template
from typing import Any, Protocol

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import Route

import rungar.web
from rungar.errors import ConfigError
from rungar.model.units import parse_duration
from runnerd.dashboard.editor import Opened, Stale
from runnerd.sizing.changes import Change

HERE = Path(__file__).parent
TEMPLATES = HERE / "templates"
STATIC = {
    "dashboard.js": HERE / "static" / "dashboard.js",
    "dashboard.css": HERE / "static" / "dashboard.css",
    "uPlot.iife.min.js": Path(rungar.web.__file__).parent / "static/vendor/uplot/uPlot.iife.min.js",
    "uPlot.min.css": Path(rungar.web.__file__).parent / "static/vendor/uplot/uPlot.min.css",
}
COOKIE = "runnerd_dashboard"
WRITE_HEADER = "x-runnerd-dashboard"
MAX_WINDOW = 30 * 86400.0  # the history keeps 30 days

# Pages load only their own script and styles, and no other site may frame them (so no page
# elsewhere can lay the editor's Save under a click of its own).
PAGE_HEADERS = {
    "cache-control": "no-store",
    "content-security-policy": (
        "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    ),
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}

PAGES = {
    "overview": "Overview",
    "jobs": "Jobs",
    "sizing": "Sizing",
    "utilization": "Utilization",
    "job": "Job",
    "config": "Config",
    "missing": "Not found",
}
JOBS_LISTED = 7 * 86400.0  # the Jobs page: the jobs of the last week, newest first
# The Utilization page's first window: the shortest that holds all the data there is, so a host
# that started minutes ago is not a flat line along a day.
SPAN_SLACK = 1.1  # a window may leave out the oldest tenth of the data
WINDOWS = (("1h", 3600.0), ("6h", 6 * 3600.0), ("24h", 86400.0), ("7d", 7 * 86400.0))


class Source(Protocol):
    """What the routes read and write (:class:`runnerd.dashboard.source.DaemonSource`)."""

    @property
    def sample_interval(self) -> float: ...
    @property
    def stream_for(self) -> float: ...

    async def overview(self) -> dict[str, Any]: ...
    async def events_after(self, after: int) -> list[dict[str, Any]]: ...
    async def latest_event(self) -> int: ...
    async def job(self, ident: str) -> dict[str, Any] | None: ...
    async def jobs(self, within: float) -> list[dict[str, Any]]: ...
    async def data_span(self) -> float | None: ...
    async def utilization(self, window: float, buckets: int = 120) -> list[dict[str, Any]]: ...
    async def sizing(self) -> dict[str, Any]: ...
    async def open_config(self, profile: str = "", undo: bool = False) -> Opened: ...
    async def save_config(
        self, text: str, version: str, profile: str, undo: bool = False
    ) -> Change | None: ...


def render(page: str, status: int = 200, **values: str) -> HTMLResponse:
    body = Template((TEMPLATES / f"{page}.html").read_text()).substitute(values)
    nav = "".join(
        f'<a href="/{"" if name == "overview" else name}"'
        f"{' class=current' if name == page or (page == 'job' and name == 'jobs') else ''}"
        f">{title}</a>"
        for name, title in PAGES.items()
        if name not in ("job", "config", "missing")
    )
    shell = Template((TEMPLATES / "page.html").read_text()).substitute(
        title=PAGES[page], page=page, nav=nav, body=body
    )
    return HTMLResponse(shell, status_code=status, headers=PAGE_HEADERS)


def window_for(span: float | None) -> str:
    """The Utilization page's first window: the shortest of 1h, 6h, 24h and 7d that holds
    ``span``, the time since the first job runnerd recorded, give or take a tenth (a day and
    an hour of history opens on 24 hours, not on a week of flat line); 30d when not even 7d
    does, 1h with no job yet."""
    if span is None:
        return WINDOWS[0][0]
    return next((text for text, seconds in WINDOWS if span <= seconds * SPAN_SLACK), "30d")


def sse(kind: str, data: Any, ident: int | None = None) -> bytes:
    head = f"id: {ident}\n" if ident is not None else ""
    return f"{head}event: {kind}\ndata: {json.dumps(data)}\n\n".encode()


async def live_messages(source: Source, after: int) -> AsyncIterator[bytes]:
    """What the live stream sends: the overview now and after each sample, and each runnerd
    event as it is recorded, until ``[host] dashboard_stream`` has passed (then the browser
    opens a new one, so a stream whose reader left without a word does not linger)."""
    loop = asyncio.get_running_loop()
    ends = loop.time() + source.stream_for
    yield b"retry: 1000\n\n"
    while True:
        yield sse("status", await source.overview())
        for event in await source.events_after(after):
            after = max(after, int(event["id"]))
            yield sse("runnerd", event, after)
        if loop.time() >= ends:
            return
        await asyncio.sleep(source.sample_interval)


class LiveStream:
    """``GET /api/live``: server-sent events, written straight to the bounded server."""

    def __init__(self, source: Source) -> None:
        self.source = source

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        request = Request(scope)
        try:
            after = int(request.headers.get("last-event-id") or -1)
        except ValueError:
            after = -1
        if after < 0:  # a new page: only what happens from now on
            after = await self.source.latest_event()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/event-stream"),
                    (b"cache-control", b"no-store"),
                ],
            }
        )
        # The peer going away shows as a failed write, which ends this (OSError).
        async for message in live_messages(self.source, after):
            await send({"type": "http.response.body", "body": message, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


class Access:
    """The token rule around the whole app (no token: loopback, or client certificates)."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.token = token.encode()

    @staticmethod
    def cookie(scope: Any) -> str:
        """A cookie per port: browsers share cookies between the ports of one host."""
        server = scope.get("server") or ("", 0)
        return f"{COOKIE}_{server[1]}"

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not self.token:
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        given = request.query_params.get("token", "").encode()
        if given and hmac.compare_digest(given, self.token):
            # Once with ?token=: a cookie from now on, and the token out of the address bar.
            response: Response = RedirectResponse(request.url.path, status_code=303)
            response.set_cookie(
                self.cookie(scope),
                given.decode(),
                httponly=True,
                secure=request.url.scheme == "https",
                samesite="strict",
            )
            await response(scope, receive, send)
            return
        header = request.headers.get("authorization", "").encode()
        cookie = request.cookies.get(self.cookie(scope), "").encode()
        if hmac.compare_digest(header, b"Bearer " + self.token) or (
            cookie and hmac.compare_digest(cookie, self.token)
        ):
            await self.app(scope, receive, send)
            return
        refused = PlainTextResponse(
            "runnerd's dashboard needs its token: open the link `runnerctl dashboard` prints "
            "(or /?token=TOKEN with the token of token_file)\n",
            status_code=401,
        )
        await refused(scope, receive, send)


def cross_site(request: Request) -> str:
    """Why a write is refused as possibly cross-site; "" when it may go on."""
    if request.headers.get(WRITE_HEADER) != "1":
        return f"a write needs the header {WRITE_HEADER}: 1, which the dashboard's pages send"
    origin = request.headers.get("origin")
    if origin is not None:
        own = f"{request.url.scheme}://{request.headers.get('host', '')}"
        if origin != own:
            return f"a write from {origin} is refused: only the dashboard's own pages may write"
    return ""


async def overview_page(request: Request) -> Response:
    return render("overview")


async def sizing_page(request: Request) -> Response:
    return render("sizing")


async def utilization_page(request: Request) -> Response:
    return render("utilization")


async def jobs_page(request: Request) -> Response:
    return render("jobs")


async def config_page(request: Request) -> Response:
    profile = request.query_params.get("profile", "")
    undo = "1" if request.query_params.get("undo") == "1" else ""
    return render("config", profile=html.escape(profile, quote=True), undo=undo)


async def static(request: Request) -> Response:
    path = STATIC.get(str(request.path_params["name"]))
    if path is None:
        return PlainTextResponse("not found\n", status_code=404)
    # Read whole: a few tens of KB, served from memory with its length.
    kind = "text/css" if path.suffix == ".css" else "text/javascript"
    return Response(path.read_bytes(), media_type=kind, headers={"cache-control": "max-age=300"})


class _Api:
    """The dashboard's answers that read its :class:`Source`: the JSON API, and the pages that
    must know whether what they show exists."""

    def __init__(self, source: Source) -> None:
        self.source = source

    async def job_page(self, request: Request) -> Response:
        ident = str(request.path_params["ident"])
        shown = html.escape(ident, quote=True)
        if await self.source.job(ident) is None:
            return render("missing", 404, ident=shown)
        return render("job", ident=shown)

    async def get_jobs(self, request: Request) -> Response:
        return JSONResponse({"within": JOBS_LISTED, "jobs": await self.source.jobs(JOBS_LISTED)})

    async def get_status(self, request: Request) -> Response:
        return JSONResponse(await self.source.overview())

    async def get_job(self, request: Request) -> Response:
        ident = str(request.path_params["ident"])
        found = await self.source.job(ident)
        if found is None:
            return JSONResponse({"error": f"no job {ident} in the history"}, status_code=404)
        return JSONResponse(found)

    async def get_sizing(self, request: Request) -> Response:
        try:
            return JSONResponse(await self.source.sizing())
        except ConfigError as e:
            return JSONResponse({"error": "config", "problems": e.problems}, status_code=422)

    async def get_utilization(self, request: Request) -> Response:
        text = request.query_params.get("window", "auto")
        if text == "auto":
            text = window_for(await self.source.data_span())
        try:
            window = parse_duration(text)
        except ValueError as e:
            return JSONResponse({"error": f"window: {e}"}, status_code=400)
        if not 0 < window <= MAX_WINDOW:
            return JSONResponse({"error": "window: between 1s and 30d"}, status_code=400)
        profiles = await self.source.utilization(window)
        return JSONResponse({"window": window, "window_text": text, "profiles": profiles})

    async def get_config(self, request: Request) -> Response:
        profile = request.query_params.get("profile", "")
        try:
            opened = await self.source.open_config(profile, request.query_params.get("undo") == "1")
        except ConfigError as e:
            return JSONResponse({"error": "config", "problems": e.problems}, status_code=422)
        return JSONResponse(
            {
                "text": opened.text,
                "version": opened.version,
                "profile": opened.profile,
                "note": opened.note,
                "undo": opened.undo,
            }
        )

    async def put_config(self, request: Request) -> Response:
        why = cross_site(request)
        if why:
            return JSONResponse({"error": why}, status_code=403)
        try:
            body = await request.json()
            text, version = str(body["text"]), str(body["version"])
            profile = str(body.get("profile") or "")
            undo = body.get("undo") is True
        except (ValueError, KeyError, TypeError):
            return JSONResponse(
                {"error": "the body must be JSON with text and version"}, status_code=400
            )
        try:
            change = await self.source.save_config(text, version, profile, undo)
        except Stale as e:
            return JSONResponse({"error": str(e)}, status_code=409)
        except ConfigError as e:
            return JSONResponse(
                {"error": "the check refused it; nothing was saved", "problems": e.problems},
                status_code=422,
            )
        return JSONResponse(
            {
                "saved": True,
                "change": change.describe() if change is not None else None,
                "message": "saved; runnerd runs with it now",
            }
        )


def app(source: Source, token: str = "") -> Any:
    api = _Api(source)
    routes = [
        Route("/", overview_page),
        Route("/sizing", sizing_page),
        Route("/utilization", utilization_page),
        Route("/jobs", jobs_page),
        Route("/jobs/{ident}", api.job_page),
        Route("/config", config_page),
        Route("/api/status", api.get_status),
        Route("/api/jobs", api.get_jobs),
        Route("/api/jobs/{ident}", api.get_job),
        Route("/api/sizing", api.get_sizing),
        Route("/api/utilization", api.get_utilization),
        Route("/api/config", api.get_config, methods=["GET"]),
        Route("/api/config", api.put_config, methods=["POST"]),
        Route("/api/live", LiveStream(source)),
        Route("/static/{name}", static),
    ]
    return Access(Starlette(routes=routes), token)
