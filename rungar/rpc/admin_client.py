"""``AdminClient``: the ``rungar.admin.v1.Admin`` service as plain async methods.

The CLI's only way to the daemon. Answers come back as JSON-able values (protobuf messages
never leave ``rungar/rpc/``); failures come back as one error tree:

* :class:`DaemonUnreachable` when the daemon cannot be asked at all (no socket file, nobody
  listening, permission denied, no answer in time): "cannot reach the rungar daemon at PATH: …";
* :class:`AdminError` when it answered no, with ``code`` one of ``not_found``,
  ``invalid_argument``, ``busy`` (FAILED_PRECONDITION), ``cut_off`` (an events follower that
  fell behind), ``ended`` (the daemon went away in the middle of a stream) or ``error``.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import grpc
import grpc.aio

from rungar.errors import RungarError
from rungar.rpc._gen.rungar.admin.v1 import admin_pb2 as pb
from rungar.rpc._gen.rungar.admin.v1 import admin_pb2_grpc as pb_grpc

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
CUT_OFF_KEY = "rungar-cut-off"
QUICK_TIMEOUT = 15.0  # reading calls: a daemon that takes longer is not answering
SLOW_TIMEOUT = 300.0  # apply (asks every provider), reconcile, removals
_CODES = {
    grpc.StatusCode.NOT_FOUND: "not_found",
    grpc.StatusCode.INVALID_ARGUMENT: "invalid_argument",
    grpc.StatusCode.FAILED_PRECONDITION: "busy",
}
_UNREACHABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
SCALE_SET_ACTIONS = {
    "pause": pb.ScaleSetActionRequest.PAUSE,
    "resume": pb.ScaleSetActionRequest.RESUME,
    "rm": pb.ScaleSetActionRequest.REMOVE,
}
PROVIDER_ACTIONS = {
    "disable": pb.ProviderActionRequest.DISABLE,
    "enable": pb.ProviderActionRequest.ENABLE,
    "drain": pb.ProviderActionRequest.DRAIN,
}


class AdminError(RungarError):
    """The daemon answered, and the answer is no."""

    def __init__(self, message: str, code: str = "error") -> None:
        self.code = code
        super().__init__(message)


class DaemonUnreachable(AdminError):
    """The daemon could not be asked."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"cannot reach the rungar daemon at {path}: {why}", "unreachable")


def event_from_pb(event: pb.Event) -> dict[str, Any]:
    try:
        attributes = json.loads(event.attributes_json) if event.attributes_json else {}
    except ValueError:
        attributes = {"raw": event.attributes_json}
    return {
        "time": event.time,
        "kind": event.kind,
        "name": event.name,
        "action": event.action,
        "scale_set": event.scale_set,
        "provider": event.provider,
        "message": event.message,
        "attributes": attributes,
    }


def _metadata_keys(metadata: Any) -> set[str]:
    # grpc.aio hands back Metadata, which iterates as (key, value) pairs; the stubs say otherwise.
    return {str(key) for key, _ in metadata or ()}


class AdminClient:
    """The admin API of the daemon listening on ``socket_path``."""

    def __init__(self, socket_path: str) -> None:
        self.path = os.path.abspath(socket_path)
        self._channel: grpc.aio.Channel | None = None
        self._stub: Any = None

    def __repr__(self) -> str:
        return f"AdminClient({self.path!r})"

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close(grace=None)
        self._channel = None
        self._stub = None

    def _connect(self) -> Any:
        if self._stub is None:
            if not os.path.exists(self.path):
                raise DaemonUnreachable(self.path, "no socket there; is `rungar serve` running?")
            options = [
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ]
            self._channel = grpc.aio.insecure_channel(f"unix:{self.path}", options=options)
            self._stub = pb_grpc.AdminStub(self._channel)
        return self._stub

    def _error(self, e: grpc.aio.AioRpcError) -> AdminError:
        code = e.code()
        details = e.details() or code.name
        trailing = _metadata_keys(e.trailing_metadata())
        if code == grpc.StatusCode.UNAVAILABLE and CUT_OFF_KEY in trailing:
            return AdminError(f"the daemon stopped sending events: {details}", "cut_off")
        if code in _UNREACHABLE:
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                details = "it did not answer in time"
            return DaemonUnreachable(self.path, details)
        return AdminError(details, _CODES.get(code, "error"))

    async def _unary(self, call: str, request: Any, timeout: float = QUICK_TIMEOUT) -> Any:
        stub = self._connect()
        try:
            return await getattr(stub, call)(request, timeout=timeout)
        except grpc.aio.AioRpcError as e:
            raise self._error(e) from e

    async def _stream(self, call: str, request: Any) -> AsyncIterator[Any]:
        stub = self._connect()
        received = False
        try:
            async for message in getattr(stub, call)(request):
                received = True
                yield message
        except grpc.aio.AioRpcError as e:
            error = self._error(e)
            if received and isinstance(error, DaemonUnreachable):
                # It was reached: it went away mid-stream (a restart, a shutdown).
                error = AdminError(f"the daemon ended the stream: {e.details()}", "ended")
            raise error from e

    # ------------------------------------------------------------------ reading

    async def status(self) -> dict[str, Any]:
        answer = await self._unary("Status", pb.StatusRequest())
        document: dict[str, Any] = json.loads(answer.status_json)
        return document

    async def usage(self, by: str, since: float) -> dict[str, Any]:
        answer = await self._unary("Usage", pb.UsageRequest(by=by, since=since))
        document: dict[str, Any] = json.loads(answer.usage_json)
        return document

    async def inspect_scale_set(self, name: str) -> dict[str, Any]:
        answer = await self._unary("InspectScaleSet", pb.InspectRequest(name=name))
        found: dict[str, Any] = json.loads(answer.json)
        return found

    async def inspect_provider(self, name: str) -> dict[str, Any]:
        answer = await self._unary("InspectProvider", pb.InspectRequest(name=name))
        found: dict[str, Any] = json.loads(answer.json)
        return found

    async def events(
        self,
        *,
        scale_set: str = "",
        provider: str = "",
        since: float = 0.0,
        limit: int = 0,
        follow: bool = False,
    ) -> AsyncGenerator[dict[str, Any], None]:
        request = pb.EventsRequest(
            scale_set=scale_set, provider=provider, since=since, limit=limit, follow=follow
        )
        async for event in self._stream("Events", request):
            yield event_from_pb(event)

    # ------------------------------------------------------------------ changing

    async def apply(self, text: str, filename: str, *, dry_run: bool) -> dict[str, Any]:
        request = pb.ApplyRequest(text=text, filename=filename, dry_run=dry_run)
        answer = await self._unary("Apply", request, SLOW_TIMEOUT)
        return {
            "applied": answer.applied,
            "problems": list(answer.problems),
            "diff": list(answer.diff),
        }

    async def scale_set_action(
        self, name: str, action: str, *, wait: bool = False
    ) -> AsyncIterator[str]:
        """``action`` is pause, resume or rm; yields the daemon's lines as they come."""
        request = pb.ScaleSetActionRequest(name=name, action=SCALE_SET_ACTIONS[action], wait=wait)
        async for line in self._stream("ScaleSetAction", request):
            yield str(line.text)

    async def provider_action(self, name: str, action: str) -> AsyncIterator[str]:
        """``action`` is disable, enable or drain; yields the daemon's lines as they come."""
        request = pb.ProviderActionRequest(name=name, action=PROVIDER_ACTIONS[action])
        async for line in self._stream("ProviderAction", request):
            yield str(line.text)

    async def remove_runners(self, names: list[str]) -> list[dict[str, Any]]:
        answer = await self._unary(
            "RemoveRunners", pb.RemoveRunnersRequest(names=names), SLOW_TIMEOUT
        )
        return [{"name": r.name, "ok": r.ok, "message": r.message} for r in answer.results]

    async def reconcile(self, scale_sets: list[str]) -> list[str]:
        answer = await self._unary(
            "Reconcile", pb.ReconcileRequest(scale_sets=scale_sets), SLOW_TIMEOUT
        )
        return [str(line) for line in answer.lines]
