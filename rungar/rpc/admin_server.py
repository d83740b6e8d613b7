"""The admin API served on the daemon's unix socket (docs/commands.md).

``await serve_admin(control, socket_path)`` serves ``rungar.admin.v1.Admin`` for an
:class:`AdminControl` (the daemon hands it the engine's ``Control``) and returns an
:class:`AdminServer` handle. Plaintext on a unix socket only: the socket file's mode (0660 by
default) is the access control, so the file is created under a umask that never lets it be
wider, then set to exactly ``mode``.

Control's answers travel as they are (status and inspect documents as JSON); its errors become
status codes: NotFound → NOT_FOUND, Busy → FAILED_PRECONDITION, ConfigError and malformed
requests → INVALID_ARGUMENT. Streams:

* ``Events`` sends the kept history, then follows with no gap and no repeat: the follower is
  registered before the history is read, in the same turn of the event loop (see ``_follow``).
  Followed events pass through a bounded buffer; a client that lets it fill is cut off with
  UNAVAILABLE (trailing metadata ``rungar-cut-off: slow-follower``) instead of growing memory.
* ``ProviderAction`` drain and ``ScaleSetAction`` with ``wait`` stream a line each time the
  number of runners left changes, polled every ``poll_interval`` seconds on ``clock``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import stat
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

import grpc
import grpc.aio
import structlog

from rungar.clock import Clock, SystemClock
from rungar.errors import Busy, ConfigError, FollowerBehind, NotFound, RungarError
from rungar.rpc._gen.rungar.admin.v1 import admin_pb2 as pb
from rungar.rpc._gen.rungar.admin.v1 import admin_pb2_grpc as pb_grpc

MAX_SOCKET_PATH = 103  # sun_path holds 108 bytes; keep room as other tools do
MAX_MESSAGE_BYTES = 16 * 1024 * 1024  # a status document of thousands of runners fits
FOLLOW_BUFFER = 1000
CUT_OFF_KEY = "rungar-cut-off"
SERVER_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
)

log = structlog.get_logger("rungar.rpc.admin")
T = TypeVar("T")
Context = grpc.aio.ServicerContext[Any, Any]


class AdminServer:
    """A running admin server; ``path`` is its socket file."""

    def __init__(self, server: grpc.aio.Server, path: str) -> None:
        self._server = server
        self.path = path

    async def stop(self, grace: float | None = 1.0) -> None:
        await self._server.stop(grace)
        with contextlib.suppress(FileNotFoundError):
            if stat.S_ISSOCK(os.lstat(self.path).st_mode):
                os.unlink(self.path)

    async def wait(self) -> None:
        await self._server.wait_for_termination()

    async def __aenter__(self) -> AdminServer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


def event_to_pb(event: dict[str, Any]) -> pb.Event:
    return pb.Event(
        time=float(event["time"]),
        kind=str(event["kind"]),
        name=str(event["name"]),
        action=str(event["action"]),
        scale_set=str(event.get("scale_set", "")),
        provider=str(event.get("provider", "")),
        message=str(event.get("message", "")),
        attributes_json=json.dumps(event.get("attributes") or {}, sort_keys=True, default=str),
    )


class AdminControl(Protocol):
    """What the admin API serves: the daemon's control surface. Its errors are
    :class:`~rungar.errors.NotFound`, :class:`~rungar.errors.Busy` and
    :class:`~rungar.errors.ConfigError`; a follower that falls behind gets
    :class:`~rungar.errors.FollowerBehind`."""

    def status(self) -> dict[str, Any]: ...

    def usage(self, by: str, since: float) -> dict[str, Any]: ...

    def events(
        self, *, scale_set: str = "", provider: str = "", since: float = 0.0, limit: int = 0
    ) -> list[dict[str, Any]]: ...

    def follow_events(self) -> AsyncIterator[dict[str, Any]]: ...

    def check_event_names(self, *, scale_set: str = "", provider: str = "") -> None: ...

    def inspect_scale_set(self, name: str) -> dict[str, Any]: ...

    def inspect_provider(self, name: str) -> dict[str, Any]: ...

    async def pause(self, name: str) -> str: ...

    async def resume(self, name: str) -> str: ...

    async def remove_scale_set(self, name: str, *, wait: bool = False) -> list[str]: ...

    def disable(self, name: str) -> str: ...

    def enable(self, name: str) -> str: ...

    async def drain(self, name: str, *, wait: bool = True) -> list[str]: ...

    async def remove_runners(self, names: list[str]) -> list[dict[str, Any]]: ...

    async def reconcile(self, names: list[str]) -> list[str]: ...

    async def apply(self, text: str, filename: str, *, dry_run: bool) -> dict[str, Any]: ...


class _Servicer(pb_grpc.AdminServicer):  # type: ignore[misc]  # generated base is untyped
    def __init__(
        self, control: AdminControl, clock: Clock, poll_interval: float, follow_buffer: int
    ) -> None:
        self._control = control
        self._clock = clock
        self._poll = poll_interval
        self._follow_buffer = follow_buffer
        # Work that must finish even if the client hangs up (a drain half done is worse).
        self._detached: set[asyncio.Task[Any]] = set()

    async def _guard(self, context: Context, call: str, work: Awaitable[T]) -> T:
        """Run ``work``, turning Control's errors into status codes."""
        try:
            return await work
        except NotFound as e:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(e))
        except Busy as e:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(e))
        except ConfigError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        except RungarError as e:
            log.warning("admin.failed", call=call, error=str(e))
            await context.abort(grpc.StatusCode.INTERNAL, str(e))
        raise AssertionError("unreachable: abort raises")  # pragma: no cover

    def _call(self, fn: Callable[[], T]) -> Awaitable[T]:
        """A synchronous Control call as an awaitable, so ``_guard`` maps its errors too."""

        async def run() -> T:
            return fn()

        return run()

    # ------------------------------------------------------------------ reading

    async def Status(self, request: pb.StatusRequest, context: Context) -> pb.StatusResponse:
        document = await self._guard(context, "Status", self._call(self._control.status))
        return pb.StatusResponse(status_json=json.dumps(document, default=str))

    async def InspectScaleSet(
        self, request: pb.InspectRequest, context: Context
    ) -> pb.InspectResponse:
        name = str(request.name)
        found = await self._guard(
            context, "InspectScaleSet", self._call(lambda: self._control.inspect_scale_set(name))
        )
        return pb.InspectResponse(json=json.dumps(found, default=str))

    async def InspectProvider(
        self, request: pb.InspectRequest, context: Context
    ) -> pb.InspectResponse:
        name = str(request.name)
        found = await self._guard(
            context, "InspectProvider", self._call(lambda: self._control.inspect_provider(name))
        )
        return pb.InspectResponse(json=json.dumps(found, default=str))

    async def Usage(self, request: pb.UsageRequest, context: Context) -> pb.UsageResponse:
        from rungar.usage.summary import BY_KEYS

        by = str(request.by) or "repository"
        if by not in BY_KEYS:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"by: must be one of {', '.join(BY_KEYS)}, not {by!r}",
            )
        since = float(request.since)
        # Months of jobs are read on a worker thread, off the engine's loop.
        document = await self._guard(
            context, "Usage", asyncio.to_thread(self._control.usage, by, since)
        )
        return pb.UsageResponse(usage_json=json.dumps(document))

    async def Events(self, request: pb.EventsRequest, context: Context) -> AsyncIterator[pb.Event]:
        scale_set, provider = str(request.scale_set), str(request.provider)
        # A filter naming nothing known is refused (with the closest name), not answered empty.
        await self._guard(
            context,
            "Events",
            self._call(
                lambda: self._control.check_event_names(scale_set=scale_set, provider=provider)
            ),
        )

        def history() -> list[dict[str, Any]]:
            return self._control.events(
                scale_set=scale_set,
                provider=provider,
                since=float(request.since),
                limit=int(request.limit),
            )

        if not request.follow:
            for event in history():
                yield event_to_pb(event)
            return

        def wanted(event: dict[str, Any]) -> bool:
            return (not scale_set or event.get("scale_set") == scale_set) and (
                not provider or event.get("provider") == provider
            )

        async for item in self._follow(history, wanted):
            if item is None:
                await context.abort(
                    grpc.StatusCode.UNAVAILABLE,
                    f"cut off: more than {self._follow_buffer} events were waiting to be read",
                    trailing_metadata=((CUT_OFF_KEY, "slow-follower"),),
                )
            else:
                yield event_to_pb(item)

    async def _follow(
        self,
        history: Callable[[], list[dict[str, Any]]],
        wanted: Callable[[dict[str, Any]], bool],
    ) -> AsyncIterator[dict[str, Any] | None]:
        """History, then live events; ``None`` once the follower has fallen too far behind."""
        buffer: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=self._follow_buffer)
        overflowed = asyncio.Event()

        async def pump() -> None:
            try:
                async for event in self._control.follow_events():
                    if not wanted(event):
                        continue
                    buffer.put_nowait(event)
            except (asyncio.QueueFull, FollowerBehind):
                overflowed.set()

        pumping = asyncio.ensure_future(pump())
        try:
            # The pump's first step registers the follower and parks; our own step is queued
            # right behind it, so no event can be recorded between the registration and the
            # history read below: each event is in exactly one of the two.
            await asyncio.sleep(0)
            for event in history():
                yield event
            while True:
                if overflowed.is_set():
                    yield None
                    return
                getting = asyncio.ensure_future(buffer.get())
                cutting = asyncio.ensure_future(overflowed.wait())
                try:
                    done, _ = await asyncio.wait(
                        {getting, cutting, pumping}, return_when=asyncio.FIRST_COMPLETED
                    )
                finally:  # also when the client hangs up: leave no waiter behind
                    getting.cancel()  # a no-op once it has its event
                    cutting.cancel()
                if getting in done:
                    yield getting.result()
                    continue
                if pumping.done() and not overflowed.is_set():
                    return  # the daemon stopped its event feed
        finally:
            pumping.cancel()

    # ------------------------------------------------------------------ changing

    async def Apply(self, request: pb.ApplyRequest, context: Context) -> pb.ApplyResponse:
        if not request.filename:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "apply needs the file's name")
        answer = await self._guard(
            context,
            "Apply",
            self._control.apply(
                str(request.text), str(request.filename), dry_run=bool(request.dry_run)
            ),
        )
        log.info("admin.apply", applied=answer["applied"], problems=len(answer["problems"]))
        return pb.ApplyResponse(
            applied=bool(answer["applied"]),
            problems=[str(p) for p in answer["problems"]],
            diff=[str(d) for d in answer["diff"]],
        )

    async def ScaleSetAction(
        self, request: pb.ScaleSetActionRequest, context: Context
    ) -> AsyncIterator[pb.ActionLine]:
        name, action, wait = str(request.name), request.action, bool(request.wait)
        if not name:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "a scale set name is needed")
        control = self._control
        if action == pb.ScaleSetActionRequest.PAUSE:
            yield pb.ActionLine(text=await self._guard(context, "pause", control.pause(name)))
            if wait:
                async for line in self._wait_for_runners(
                    lambda: len(control.inspect_scale_set(name)["runner_list"]),
                    lambda n: f"Waiting for {n} runners of {name} to finish",
                ):
                    yield pb.ActionLine(text=line)
                yield pb.ActionLine(text=f"{name} is paused, and no runner of it is left")
        elif action == pb.ScaleSetActionRequest.RESUME:
            yield pb.ActionLine(text=await self._guard(context, "resume", control.resume(name)))
        elif action == pb.ScaleSetActionRequest.REMOVE:
            removing = self._detach(control.remove_scale_set(name, wait=wait))
            for line in await self._guard(context, "remove", asyncio.shield(removing)):
                yield pb.ActionLine(text=line)
        else:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unknown action {action}")
        log.info("admin.scale_set", scale_set=name, action=action, wait=wait)

    async def ProviderAction(
        self, request: pb.ProviderActionRequest, context: Context
    ) -> AsyncIterator[pb.ActionLine]:
        name, action = str(request.name), request.action
        control = self._control
        log.info("admin.provider", provider=name, action=action)
        if action == pb.ProviderActionRequest.DISABLE:
            yield pb.ActionLine(text=await self._guard(context, "disable", self._disable(name)))
        elif action == pb.ProviderActionRequest.ENABLE:
            line = await self._guard(context, "enable", self._call(lambda: control.enable(name)))
            yield pb.ActionLine(text=line)
        elif action == pb.ProviderActionRequest.DRAIN:
            # Disabling first (as drain itself does; it is idempotent) gives its sentence at
            # once; the waiting lines come from watching the count while drain works.
            yield pb.ActionLine(text=await self._guard(context, "drain", self._disable(name)))
            draining = self._detach(control.drain(name, wait=True))
            async for line in self._wait_for_runners(
                lambda: len(control.inspect_provider(name)["runner_list"]),
                lambda n: f"Waiting for {n} runners on {name} to finish",
                until=draining,
            ):
                yield pb.ActionLine(text=line)
            for line in await self._guard(context, "drain", asyncio.shield(draining)):
                if not line.startswith(("Provider ", "Waiting for ")):  # already sent
                    yield pb.ActionLine(text=line)
        else:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unknown action {action}")

    async def _disable(self, name: str) -> str:
        return self._control.disable(name)

    def _detach(self, work: Awaitable[T]) -> asyncio.Task[T]:
        task = asyncio.ensure_future(work)
        self._detached.add(task)
        task.add_done_callback(self._detached.discard)
        return task

    async def _wait_for_runners(
        self,
        count: Callable[[], int],
        line: Callable[[int], str],
        until: asyncio.Task[Any] | None = None,
    ) -> AsyncIterator[str]:
        """A line each time ``count()`` changes, until it is 0 (or ``until`` is done)."""
        last = -1
        while True:
            if until is not None and until.done():
                return
            try:
                left = count()
            except NotFound:
                return  # removed meanwhile: nothing of it is left to wait for
            if left == 0:
                return
            if left != last:
                yield line(left)
                last = left
            await self._clock.sleep(self._poll)

    async def RemoveRunners(
        self, request: pb.RemoveRunnersRequest, context: Context
    ) -> pb.RemoveRunnersResponse:
        names = [str(n) for n in request.names]
        if not names:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "no runner names given")
        removing = self._detach(self._control.remove_runners(names))
        results = await self._guard(context, "RemoveRunners", asyncio.shield(removing))
        log.info("admin.remove_runners", runners=names, removed=sum(r["ok"] for r in results))
        return pb.RemoveRunnersResponse(
            results=[
                pb.RemoveRunnersResponse.Result(
                    name=str(r["name"]), ok=bool(r["ok"]), message=str(r["message"])
                )
                for r in results
            ]
        )

    async def Reconcile(
        self, request: pb.ReconcileRequest, context: Context
    ) -> pb.ReconcileResponse:
        names = [str(n) for n in request.scale_sets]
        lines = await self._guard(context, "Reconcile", self._control.reconcile(names))
        return pb.ReconcileResponse(lines=lines)


def check_socket_path(path: str) -> str:
    """The absolute socket path, or ConfigError when a unix socket cannot have it."""
    absolute = os.path.abspath(path)
    if len(absolute) > MAX_SOCKET_PATH:
        raise ConfigError(
            [
                f"socket: {absolute} is {len(absolute)} characters long; a unix socket path "
                f"may have at most {MAX_SOCKET_PATH}"
            ]
        )
    return absolute


def _clear_stale(path: str) -> None:
    """Remove a socket file a crashed daemon left; refuse to take over a live one."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise ConfigError([f"socket: {path} exists and is not a socket; not replacing it"])
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except (ConnectionRefusedError, FileNotFoundError):
        os.unlink(path)
        return
    except OSError as e:
        raise ConfigError([f"socket: {path}: cannot check whether it is in use: {e}"]) from e
    finally:
        probe.close()
    raise ConfigError([f"socket: {path} is in use: another rungar daemon listens there"])


async def serve_admin(
    control: AdminControl,
    socket_path: str,
    mode: int = 0o660,
    *,
    clock: Clock | None = None,
    poll_interval: float = 5.0,
    follow_buffer: int = FOLLOW_BUFFER,
) -> AdminServer:
    """Serve the admin API for ``control`` on ``socket_path``; returns once it listens."""
    path = check_socket_path(socket_path)
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError([f"socket: cannot make its folder {Path(path).parent}: {e}"]) from e
    _clear_stale(path)
    server = grpc.aio.server(options=list(SERVER_OPTIONS))
    servicer = _Servicer(control, clock or SystemClock(), poll_interval, follow_buffer)
    pb_grpc.add_AdminServicer_to_server(servicer, server)
    # The socket is created by the bind: under this umask it is never wider than ``mode``.
    # (umask is process-wide; this runs once, at daemon start, before other files are made.)
    previous = os.umask(0o777 & ~mode)
    try:
        try:
            server.add_insecure_port(f"unix:{path}")
        except RuntimeError as e:
            raise ConfigError([f"socket: {path}: cannot listen: {e}"]) from e
        await server.start()
    finally:
        os.umask(previous)
    os.chmod(path, mode)
    log.info("admin.serving", socket=path, mode=oct(mode))
    return AdminServer(server, path)
