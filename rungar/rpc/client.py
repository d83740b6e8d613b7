"""``GrpcProvider``: the :class:`rungar.model.provider.Provider` role over gRPC (the proto).

One channel per provider, opened on first use and kept (gRPC reconnects it by itself, with a
short backoff so a restarted provider is reconnected within a second). Every call carries
exactly one of three deadlines, as the configuration reference names them:

* ``Create``: what is left of the scale set's ``start_timeout`` (the request's ``budget``),
  plus ``CREATE_DEADLINE_SLACK``; never the provider's ``timeout``. The provider learns from it
  how long it has; the caller, not this deadline, ends a Create that overruns its budget (the
  engine, on its clock), so the slack keeps gRPC from ending it first with another reason;
* ``Delete``: ``timing.delete_timeout``;
* ``List``, ``Info``, ``ValidateRunner``, ``UpdateRunner``: the provider's ``timeout``, which is
  ``timing.provider_timeout`` when the provider sets none.

Every call names its caller (installation, daemon host, daemon start) in metadata when given
one.

The mapping of answers is the protocol's core rule:

* ``Refused`` is an ordinary answer and becomes a :class:`~rungar.model.machine.Refusal` value;
* no answer (``UNAVAILABLE``: connection refused, TLS handshake failed, peer gone;
  ``DEADLINE_EXCEEDED``; ``CANCELLED`` by the peer) raises :class:`ProviderUnavailable`, after
  which a create's outcome is unknown and must be settled (:mod:`rungar.rpc.settle`);
* any other gRPC status (``UNAUTHENTICATED``, ``INTERNAL``, ...) raises :class:`ProviderError`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import grpc
import grpc.aio

from rungar.errors import ConfigError, ProviderError, ProviderUnavailable
from rungar.model import bounded
from rungar.model.caller import Caller
from rungar.model.machine import (
    Created,
    CreateRequest,
    JobHint,
    Machine,
    ProviderInfo,
    Refusal,
    Removal,
)
from rungar.model.runner_block import RunnerBlock
from rungar.rpc import convert
from rungar.rpc._gen.rungar.provider.v1 import provider_pb2 as pb
from rungar.rpc._gen.rungar.provider.v1 import provider_pb2_grpc as pb_grpc
from rungar.rpc.reconnects import Reconnects
from rungar.rpc.tls import ClientTls, channel_credentials, check_address, is_unix
from rungar.stopping import timed_out

MAX_MESSAGE_BYTES = 1024 * 1024
# How much later than the request's budget a Create's gRPC deadline falls: the caller's own
# timer ends the call first, so an overrun ends once, as "ran out of time", not "did not answer".
CREATE_DEADLINE_SLACK = 1.0
NO_ANSWER = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED}
)

CHANNEL_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    # Ping an open connection during calls so a dead peer is noticed before the deadline;
    # no pings while idle, which strict servers (and their too_many_pings rule) dislike.
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 0),
    # A provider that comes back is reconnected within a second, not after gRPC's backoff of
    # up to 2 minutes: the wait between refused attempts never grows past 800 ms (plus gRPC's
    # 20% jitter). A connection that breaks after it is made is waited on by the client itself
    # (rungar.rpc.reconnects), 1 s doubling to 30 s. An attempt nobody answers (a host that
    # drops it) is given 2 s, enough for a TLS handshake over a slow link, instead of gRPC's 20 s.
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 800),
    ("grpc.min_reconnect_backoff_ms", 2_000),
)


# gRPC's own words for a connection that could not be made (its reconnect backoff applies),
# and for one lost under a call.
NOT_MADE = "failed to connect to all addresses"
LOST = "Stream removed"


def map_rpc_error(
    provider: str, call: str, error: grpc.aio.AioRpcError, timeout: float | None = None
) -> ProviderError:
    """The one conversion of a gRPC failure into Rungar's error tree; a deadline that passed
    says which call timed out and after how long (``timeout``, the call's deadline)."""
    code = error.code()
    if code is grpc.StatusCode.DEADLINE_EXCEEDED and timeout is not None:
        return ProviderUnavailable(f"provider {provider}: {timed_out(call, timeout)}")
    details = bounded.sentence(error.details() or "") or code.name
    if code in NO_ANSWER:
        return ProviderUnavailable(f"provider {provider} did not answer {call}: {details}")
    return ProviderError(f"provider {provider}: {call} failed: {code.name}: {details}")


class GrpcProvider:
    """A provider reached at ``unix:///path`` (plaintext allowed) or ``host:port`` (TLS only)."""

    def __init__(
        self,
        name: str,
        address: str,
        *,
        tls: ClientTls | None = None,
        token: str = "",
        timeout: float = 10.0,
        delete_timeout: float = 120.0,
        caller: Caller | None = None,
    ) -> None:
        check_address(address, secured=tls is not None, who=f"provider {name}")
        if token and tls is None:
            raise ConfigError([f"provider {name}: a token is only ever sent over TLS"])
        self.name = name
        self.address = address
        self._tls = tls
        self._token = token
        self.set_timeouts(timeout=timeout, delete_timeout=delete_timeout)
        self._channel: grpc.aio.Channel | None = None
        self._stub: Any = None
        # Who is calling, on every call (provider.proto): built once, the same for each call.
        self._metadata = caller.metadata() if caller is not None else None
        # Calls in flight, so a connection ``rungar apply`` replaced closes once they end.
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        # A connection that breaks once made is tried again after a wait (rungar.rpc.reconnects).
        self.reconnects = Reconnects()
        self._closing: set[asyncio.Future[None]] = set()  # channels dropped after a break

    def __repr__(self) -> str:
        return f"GrpcProvider({self.name!r}, {self.address!r})"  # never the token

    def set_timeouts(self, *, timeout: float, delete_timeout: float) -> None:
        """The deadlines of List/Info/ValidateRunner/UpdateRunner and of Delete; taken by the
        next call. A Create's comes with its request."""
        if min(timeout, delete_timeout) <= 0:
            raise ConfigError([f"provider {self.name}: timeout must be positive"])
        self._timeout = timeout
        self._delete_timeout = delete_timeout

    def _connect(self) -> Any:
        if self._stub is not None:
            return self._stub
        options: list[tuple[str, int | str]] = list(CHANNEL_OPTIONS)
        if self._tls is None:
            self._channel = grpc.aio.insecure_channel(self.address, options=options)
        else:
            credentials = channel_credentials(self._tls)
            if self._token:
                credentials = grpc.composite_channel_credentials(
                    credentials, grpc.access_token_call_credentials(self._token)
                )
            if self._tls.server_name:
                options.append(("grpc.ssl_target_name_override", self._tls.server_name))
            target = self.address
            if is_unix(target) and not self._tls.server_name:
                options.append(("grpc.ssl_target_name_override", "localhost"))
            self._channel = grpc.aio.secure_channel(target, credentials, options=options)
        self._stub = pb_grpc.ProviderStub(self._channel)
        return self._stub

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close(grace=None)
        self._channel = None
        self._stub = None

    @property
    def in_flight(self) -> int:
        """Calls sent and not yet answered."""
        return self._in_flight

    async def close_when_idle(self) -> None:
        """Close once no call is in flight: every call already sent gets its answer (each ends
        by its own deadline at the latest), none is cut short."""
        while self._in_flight:
            await self._idle.wait()
        await self.close()

    def _started(self) -> None:
        self._in_flight += 1
        self._idle.clear()

    def _ended(self) -> None:
        self._in_flight -= 1
        if not self._in_flight:
            self._idle.set()

    def _check_connection(self, call: str) -> None:
        """Fail at once while a failed connection waits to be tried again."""
        left = self.reconnects.left()
        if left:
            raise ProviderUnavailable(
                f"provider {self.name} did not answer {call}: {self.reconnects.what} "
                f"({self.reconnects.why}); trying again in {left:.1f} s"
            )

    def _failed(self, call: str, error: grpc.aio.AioRpcError, timeout: float | None) -> Exception:
        """The error to raise; a connection that failed makes the next calls wait
        (rungar.rpc.reconnects), never a provider that answered UNAVAILABLE on a sound
        connection (the channel still ready). One that could not be made is tried again a
        second later; one that broke after it was made (the channel lost it), 1 s doubling to
        30 s."""
        mapped = map_rpc_error(self.name, call, error, timeout)
        if error.code() is not grpc.StatusCode.UNAVAILABLE:
            return mapped
        channel = self._channel
        details = error.details() or ""
        why = bounded.sentence(details, 200)
        if details.startswith(NOT_MADE):
            self.reconnects.not_made(why)
        elif (
            details.startswith(LOST)
            or channel is None
            or channel.get_state(try_to_connect=False) is not grpc.ChannelConnectivity.READY
        ):
            self.reconnects.broke(why)
        else:
            return mapped
        self._drop_channel()
        return mapped

    def _drop_channel(self) -> None:
        """Close the channel whose connection failed: gRPC would otherwise keep connecting
        again in the background (every 0.2 to 0.8 s), however long the calls wait. The next
        call allowed makes a new one, which connects at once."""
        channel, self._channel, self._stub = self._channel, None, None
        if channel is not None:
            closing = asyncio.ensure_future(channel.close(grace=None))
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)

    async def _call(self, call: str, request: Any, timeout: float) -> Any:
        self._check_connection(call)
        stub = self._connect()
        self._started()
        try:
            answer = await getattr(stub, call)(request, timeout=timeout, metadata=self._metadata)
        except grpc.aio.AioRpcError as e:
            raise self._failed(call, e, timeout) from e
        finally:
            self._ended()
        self.reconnects.answered()
        return answer

    async def info(self) -> ProviderInfo:
        return convert.info_from_pb(await self._call("Info", pb.InfoRequest(), self._timeout))

    async def validate_runner(self, runner: Mapping[str, Any]) -> list[str]:
        try:
            block = RunnerBlock.from_mapping(runner)
        except ValueError as e:
            return [str(e)]  # not even expressible in the protocol; nothing to ask
        request = pb.ValidateRunnerRequest(runner=convert.runner_to_pb(block))
        answer = await self._call("ValidateRunner", request, self._timeout)
        return [bounded.sentence(str(p)) for p in answer.problems[: bounded.LINES_MAX]]

    async def create(self, request: CreateRequest) -> Created | Refusal:
        """Create or refuse. The call's deadline tells the provider how long it has: the
        request's ``budget`` (what is left of start_timeout), else none; the caller bounds the
        call on its own clock, and this client never gives up on a Create before it does."""
        timeout = None if request.budget is None else request.budget + CREATE_DEADLINE_SLACK
        # The hot call, so the stub is called here rather than through _call.
        self._check_connection("Create")
        message = convert.create_request_to_pb(request)
        stub = self._stub if self._stub is not None else self._connect()
        self._started()
        try:
            answer = await stub.Create(message, timeout=timeout, metadata=self._metadata)
        except grpc.aio.AioRpcError as e:
            raise self._failed("Create", e, timeout) from e
        finally:
            self._ended()
        self.reconnects.answered()
        return convert.create_response_from_pb(answer, provider=self.name)

    async def delete(self, name: str, removal: Removal | None = None) -> None:
        request = convert.delete_request_to_pb(name, removal)
        await self._call("Delete", request, self._delete_timeout)

    async def list(self, selector: Mapping[str, str]) -> list[Machine]:
        answer = await self._call("List", pb.ListRequest(selector=dict(selector)), self._timeout)
        return [convert.machine_from_pb(m, provider=self.name) for m in answer.machines]

    async def update_runner(self, name: str, job: JobHint) -> None:
        request = pb.UpdateRunnerRequest(runner_name=name, job=convert.hint_to_pb(job))
        await self._call("UpdateRunner", request, self._timeout)

    async def last_output(self, name: str, lines: int = 20) -> Sequence[str]:
        """LastOutput; a provider that does not implement it (an older plugin) has no lines."""
        self._check_connection("LastOutput")
        stub = self._connect()
        self._started()
        try:
            answer = await stub.LastOutput(
                pb.LastOutputRequest(name=name, lines=max(0, lines)),
                timeout=self._timeout,
                metadata=self._metadata,
            )
        except grpc.aio.AioRpcError as e:
            if e.code() is grpc.StatusCode.UNIMPLEMENTED:
                return []
            raise self._failed("LastOutput", e, self._timeout) from e
        finally:
            self._ended()
        kept = answer.lines[-min(bounded.LINES_MAX, lines or 20) :]  # the last ones asked for
        return [bounded.sentence(str(line)) for line in kept]

    async def queue_changed(self, name: str, queued: tuple[JobHint, ...]) -> None:
        """The jobs queued now for the scale set of ``name``, a runner that has not taken a
        job yet (UpdateRunner without a job)."""
        request = pb.UpdateRunnerRequest(
            runner_name=name, queued=[convert.hint_to_pb(h) for h in queued]
        )
        await self._call("UpdateRunner", request, self._timeout)
