"""runnerctl's local API: HTTP/JSON on a unix socket (starlette + uvicorn).

docs/admission.md, "The host's memory" (the host line beside the budget), for ``runnerctl
status`` and ``watch``. Read-only: ``GET /status`` is the daemon's live view, ``GET /jobs/{id}``
a job's record, ``GET /events?after=ID&wait=S`` the events after ``ID`` (``runnerctl
events``). The socket is created 0600: runnerd's API is root-equivalent on its host.
``GET /dashboard`` is the dashboard's login link (``runnerctl --socket S dashboard``: the token
is no more than the socket's own user may read). ``runnerctl job`` also works without the
daemon by reading the history read-only.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from rungar.model.machine import MachineState
from rungar.model.units import format_bytes
from rungar.stopping import signal_free_server
from runnerd.admission import counted_memory, cpu_line, memory_reserved
from runnerd.admission import host as hostguard
from runnerd.dashboard.login import login_link
from runnerd.events import Event
from runnerd.provider import RunnerdProvider

MAX_WAIT = 60.0  # the longest a GET /events waits for a new event

# A queue entry's kind as the status line says it: "jvm waits for a slot since 12:00:04".
QUEUE_PHRASES = {
    "slots": "a slot",
    "memory": "memory (MemoryMax)",
    "host": "the host's memory",
    "cpu": "CPU",
    "disk": "disk",
}


def status(provider: RunnerdProvider) -> dict[str, Any]:
    """The daemon's live view, as runnerctl status prints it."""
    now = provider.clock.now()
    limits = provider.limits
    readings = provider.readings
    slice_fresh = readings.slice is not None and now - readings.slice.at <= limits.fresh_for
    live = [r for r in provider.runners.values() if r.state is not MachineState.STOPPED]
    running = [r.running() for r in live]
    reserved = memory_reserved(running, limits, slice_fresh, now)
    budget = limits.memory_max
    if budget is None:
        budget_line = f"budget: no MemoryMax; {format_bytes(reserved)} reserved"
    else:
        free = budget - limits.mirror - reserved
        budget_line = (
            f"budget: {format_bytes(reserved)} of {format_bytes(budget)} reserved "
            f"({limits.policy.value}), {format_bytes(max(0, free))} free"
        )
    host = readings.host
    host_line = ""
    host_room = None
    if host is not None and now - host.at <= limits.fresh_for:
        host_line = hostguard.host_line(host, limits, reserved, provider.guard.widened, len(live))
        host_room = hostguard.room(host, limits, provider.guard.widened, len(live))
    elif host is not None:
        host_line = "host: no recent reading; only MemoryMax bounds starts"
    return {
        "policy": limits.policy.value,
        "memory_max": budget,
        "budget": budget_line,
        "host": host_line,
        "cpu": cpu_line(running, limits, provider.guard),
        "slice": readings.slice.memory if readings.slice else None,
        "mirror": limits.mirror,
        "host_room": host_room,  # what the host leaves the slice; None without a reading
        "slice_cpus": provider.slice_cpus,
        "reserved": reserved,
        # Scale sets this host refuses while a job they were refused for has not started;
        # ``since``: the first of these refusals, runnerd's clock (docs/runnerd.md).
        "queue": [
            {
                "scale_set": name,
                "since": w.first,
                "kind": w.resource,
                "waits_for": QUEUE_PHRASES.get(w.resource, w.resource),
                "why": w.why,
            }
            for name, w in provider.queue(now).items()
        ],
        "runners": [
            {
                "name": r.name,
                "profile": r.profile.name,
                "scale_set": r.scale_set,
                "state": r.state.value,
                "reserved": r.reserved,
                "counted": counted_memory(r.running(), limits, slice_fresh, now),
                "used": r.used,
                "peak": r.peak,
                "cap": r.profile.memory,
                "cpu": r.reserved_cpu,
                "basis": r.basis,
                "row": r.row,  # its job's record: GET /jobs/{row}, runnerctl job
                "job": f"{r.job.repository} {r.job.workflow}/{r.job.job}" if r.job else "",
                "job_id": r.job.job_id if r.job and r.job.job_id else str(r.row),
            }
            for r in provider.runners.values()
        ],
    }


async def unless_stopping(
    waiting: Coroutine[Any, Any, list[Event]], stopping: asyncio.Event
) -> list[Event]:
    """What ``waiting`` finds, or none as soon as the API stops: a follower's long poll
    (``runnerctl events -f``, ``runnerctl tui``) must not hold the daemon's exit for its wait."""
    found = asyncio.ensure_future(waiting)
    stopped = asyncio.ensure_future(stopping.wait())
    done, _ = await asyncio.wait({found, stopped}, return_when=asyncio.FIRST_COMPLETED)
    for task in (found, stopped):
        if task not in done:
            task.cancel()
    return found.result() if found in done else []


def app(
    provider: RunnerdProvider,
    stopping: asyncio.Event | None = None,
    reload: Callable[[], list[str]] | None = None,
) -> Starlette:
    """The local API. ``reload`` runs the daemon with its config file as it is now, as SIGHUP
    and the dashboard's save do (``runnerd.daemon.reload``): ``POST /reload``, which
    ``runnerctl tui`` sends after its apply."""
    stopping = stopping or asyncio.Event()

    async def get_status(request: Request) -> JSONResponse:
        return JSONResponse(status(provider))

    async def get_job(request: Request) -> JSONResponse:
        ident = str(request.path_params["ident"])
        row = await provider.history.run(provider.history.job, ident)
        if row is None:
            return JSONResponse({"error": f"no job {ident} in the history"}, status_code=404)
        return JSONResponse(row)

    async def get_events(request: Request) -> JSONResponse:
        """``?after=ID`` (default 0) and ``?wait=SECONDS`` (default 0, at most 60): a long poll."""
        events = provider.events
        if events is None:
            return JSONResponse({"events": []})
        try:
            after = int(request.query_params.get("after", "0"))
            wait = min(MAX_WAIT, max(0.0, float(request.query_params.get("wait", "0"))))
        except ValueError:
            return JSONResponse({"error": "after and wait must be numbers"}, status_code=400)
        found = await unless_stopping(events.wait(after, wait), stopping)
        return JSONResponse({"events": [e.to_json() for e in found]})

    async def post_reload(request: Request) -> JSONResponse:
        if reload is None:
            return JSONResponse({"error": "this runnerd does not reload over its API"}, 404)
        problems = reload()
        return JSONResponse({"reloaded": not problems, "problems": problems})

    async def get_dashboard(request: Request) -> JSONResponse:
        host = provider.config.host
        if not host.dashboard_listen:
            return JSONResponse({"link": ""})
        try:
            return JSONResponse({"link": login_link(host)})
        except OSError as e:
            return JSONResponse({"error": f"cannot read the dashboard's token ({e.strerror})"})

    return Starlette(
        routes=[
            Route("/status", get_status),
            Route("/dashboard", get_dashboard),
            Route("/jobs/{ident}", get_job),
            Route("/events", get_events),
            Route("/reload", post_reload, methods=["POST"]),
        ]
    )


class ApiServer:
    def __init__(
        self, server: uvicorn.Server, task: asyncio.Task[None], stopping: asyncio.Event
    ) -> None:
        self._server = server
        self._stopping = stopping
        self.task = task

    async def stop(self) -> None:
        self._stopping.set()  # long polls answer at once instead of holding the exit
        self._server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


async def serve_api(
    provider: RunnerdProvider, path: str, reload: Callable[[], list[str]] | None = None
) -> ApiServer:
    socket = Path(path)
    socket.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        socket.unlink()
    stopping = asyncio.Event()
    config = uvicorn.Config(
        # log_config=None: its lines go through the process's logging (rungar.logs), as JSON.
        app(provider, stopping, reload),
        uds=str(socket),
        log_level="warning",
        lifespan="off",
        log_config=None,
    )
    server: uvicorn.Server = signal_free_server(config)  # the daemon owns the signals
    task = asyncio.create_task(server.serve())
    for _ in range(200):
        if server.started:
            break
        await asyncio.sleep(0.01)
    os.chmod(socket, 0o600)
    return ApiServer(server, task, stopping)
