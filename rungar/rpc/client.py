"""``GrpcProvider``: the :class:`rungar.model.provider.Provider` role over gRPC (the proto).

One channel per provider, opened on first use and kept while its connection holds. A new
channel connects before any call goes on it, one attempt shared by every caller waiting
(:meth:`GrpcProvider._open`): one connection per attempt, where a call sent on a channel whose
peer answers garbage after a valid HTTP/2 preface makes gRPC connect again, several times, before
it fails. After a connection fails, the wait before the next attempt is
:mod:`rungar.rpc.reconnects`'. Every call carries
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
import contextlib
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
from rungar.rpc.reconnects import BROKE, Reconnects
from rungar.rpc.tls import ClientTls, channel_credentials, check_address, is_unix
from rungar.stopping import timed_out

MAX_MESSAGE_BYTES = 1024 * 1024
CONNECT_TIMEOUT_MS = 2_000
# How much later than the request's budget a Create's gRPC deadline falls: the caller's own
# timer ends the call first, so an overrun ends once, as "ran out of time", not "did not answer".
CREATE_DEADLINE_SLACK = 1.0
UNIMPLEMENTED = grpc.StatusCode.UNIMPLEMENTED
IDLE = grpc.ChannelConnectivity.IDLE
READY = grpc.ChannelConnectivity.READY
# A new channel's states that end its connection attempt (:meth:`GrpcProvider._open`).
SETTLED = frozenset(
    {
        grpc.ChannelConnectivity.READY,
        grpc.ChannelConnectivity.TRANSIENT_FAILURE,
        grpc.ChannelConnectivity.SHUTDOWN,
    }
)
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
    # The client, not the channel, decides when to connect again (rungar.rpc.reconnects): a
    # channel whose connection failed is closed. gRPC's own backoff (1 s doubling to 30 s)
    # only keeps a channel in TRANSIENT_FAILURE from connecting again in the moment between
    # its failure and its close. An attempt nobody answers (a host that drops it) is given
    # 2 s, enough for a TLS handshake over a slow link, instead of gRPC's 20 s.
    ("grpc.initial_reconnect_backoff_ms", 1_000),
    ("grpc.max_reconnect_backoff_ms", 30_000),
    ("grpc.min_reconnect_backoff_ms", CONNECT_TIMEOUT_MS),
)
# How long a new channel's attempt is waited on before calls go on it anyway: gRPC gives up on
# the attempt itself after CONNECT_TIMEOUT_MS.
OPEN_WAIT = CONNECT_TIMEOUT_MS / 1000 + 1.0
# What a connection closed by its peer as soon as it was made is said to be.
CLOSED_AT_ONCE = "the peer closed it as soon as it was made"
CLOSED_SOON = "the peer closed it before its first answer"
# How long a new connection must stay open before calls go on it; after a connection broke once
# made, longer: a peer that closed one that way is watched for it.
SETTLE = 0.02
SETTLE_AFTER_BREAK = 0.5


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
        self._opening: asyncio.Future[None] | None = None  # a new channel's attempt (_open)
        self._watching: asyncio.Future[None] | None = None  # a new channel's first answer

    def __repr__(self) -> str:
        return f"GrpcProvider({self.name!r}, {self.address!r})"  # never the token

    def set_timeouts(self, *, timeout: float, delete_timeout: float) -> None:
        """The deadlines of List/Info/ValidateRunner/UpdateRunner and of Delete; taken by the
        next call. A Create's comes with its request."""
        if min(timeout, delete_timeout) <= 0:
            raise ConfigError([f"provider {self.name}: timeout must be positive"])
        self._timeout = timeout
        self._delete_timeout = delete_timeout

    def _connect(self) -> grpc.aio.Channel:
        """A new channel, not yet connected (:meth:`_open` connects it)."""
        options: list[tuple[str, int | str]] = list(CHANNEL_OPTIONS)
        if self._tls is None:
            channel = grpc.aio.insecure_channel(self.address, options=options)
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
            channel = grpc.aio.secure_channel(target, credentials, options=options)
        self._channel = channel
        return channel

    async def _open(self) -> None:
        """Connect a new channel before any call goes on it: one connection attempt, which every
        call waiting meanwhile shares. Once the channel is connected, or the attempt failed
        before a connection was made, its stub takes calls: a call on a channel that failed to
        connect fails at once with gRPC's words for why and makes no new connection (gRPC's
        backoff holds it). A connection its peer closed as soon as it was made (within
        ``SETTLE``) ends the attempt here with no call sent: a call would make gRPC connect
        again, and again, until one connection lived long enough to fail it."""
        if self.reconnects.failing:
            self.reconnects.attempted()
        channel = self._connect()
        state = channel.get_state(try_to_connect=True)
        changed = False
        loop = asyncio.get_running_loop()
        end = loop.time() + OPEN_WAIT
        while state not in SETTLED and not (changed and state is IDLE):
            try:
                await asyncio.wait_for(channel.wait_for_state_change(state), end - loop.time())
            except TimeoutError:
                break  # still connecting: calls go on it, each with its own deadline
            changed = True
            state = channel.get_state()
        made = state is READY
        if made:
            # A peer that sends garbage right after its preface has the connection closed
            # within moments of it being made: a call sent then would connect again.
            broke = self.reconnects.failing and self.reconnects.what == BROKE
            with contextlib.suppress(TimeoutError):
                settle = SETTLE_AFTER_BREAK if broke else SETTLE
                await asyncio.wait_for(channel.wait_for_state_change(READY), settle)
                state = channel.get_state()
        if channel is not self._channel:
            return  # closed meanwhile
        if (changed and state is IDLE) or (made and state is not READY):
            self.reconnects.broke(CLOSED_AT_ONCE)
            self._drop_channel()
            return
        self._stub = pb_grpc.ProviderStub(channel)
        if state is READY:
            self._watching = asyncio.ensure_future(self._watch(channel))

    async def _watch(self, channel: grpc.aio.Channel) -> None:
        """Until a call on a new channel is answered, the channel is closed the moment its
        connection is lost: the calls in flight on it would otherwise make gRPC connect again,
        each, at once."""
        await channel.wait_for_state_change(READY)
        if channel is self._channel:
            self.reconnects.broke(CLOSED_SOON)
            self._drop_channel()

    def _answered(self) -> None:
        self.reconnects.answered()
        watching, self._watching = self._watching, None
        if watching is not None:
            watching.cancel()

    async def _ready(self, call: str, timeout: float | None) -> tuple[Any, float | None]:
        """The stub to call on once a new channel's attempt (:meth:`_open`) is over, and what
        is left of the call's ``timeout``."""
        if self._opening is None:
            self._opening = asyncio.ensure_future(self._open())
            self._opening.add_done_callback(self._opened)
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            await asyncio.wait_for(asyncio.shield(self._opening), timeout)
        except TimeoutError:
            raise ProviderUnavailable(
                f"provider {self.name}: {timed_out(call, timeout or 0)}"
            ) from None
        if self._stub is None:  # the attempt failed
            self._check_connection(call)
            raise ProviderUnavailable(f"provider {self.name} did not answer {call}: not connected")
        left = None if timeout is None else max(0.001, timeout - (loop.time() - started))
        return self._stub, left

    def _opened(self, opening: asyncio.Future[None]) -> None:
        if opening is self._opening:
            self._opening = None
        if not opening.cancelled():
            opening.exception()  # raised to the calls that waited; retrieved here once

    async def close(self) -> None:
        opening, self._opening = self._opening, None
        if opening is not None:
            opening.cancel()
        watching, self._watching = self._watching, None
        if watching is not None:
            watching.cancel()
        channel, self._channel, self._stub = self._channel, None, None
        if channel is not None:
            await channel.close(grace=None)
        # Channels dropped after a break close in the background: none outlives the client.
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)

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

    def _failed(
        self,
        call: str,
        error: grpc.aio.AioRpcError,
        timeout: float | None,
        channel: grpc.aio.Channel | None,
    ) -> Exception:
        """The error to raise; a connection that failed makes the next calls wait
        (rungar.rpc.reconnects), never a provider that answered UNAVAILABLE on a sound
        connection (the channel still ready). One that could not be made is tried again a
        second later; one that broke after it was made (the channel lost it), 1 s doubling to
        30 s. A failure of a channel already dropped was counted by the call that dropped it:
        calls failing together are one failure."""
        mapped = map_rpc_error(self.name, call, error, timeout)
        if error.code() is not grpc.StatusCode.UNAVAILABLE or channel is not self._channel:
            return mapped
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

    def _cut_off(self, call: str, channel: grpc.aio.Channel | None) -> ProviderUnavailable | None:
        """Why a call was cancelled under this task: its channel was closed (another call found
        its connection failed, or the client closed); None when the task itself is cancelled."""
        task = asyncio.current_task()
        if (task is not None and task.cancelling()) or channel is self._channel:
            return None
        what = self.reconnects.what or "its connection was closed"
        why = f" ({self.reconnects.why})" if self.reconnects.why else ""
        return ProviderUnavailable(f"provider {self.name} did not answer {call}: {what}{why}")

    def _drop_channel(self) -> None:
        """Close the channel whose connection failed: gRPC would otherwise keep connecting
        again in the background, however long the calls wait. The next call allowed makes a
        new one, which connects before calls go on it (:meth:`_open`)."""
        channel, self._channel, self._stub = self._channel, None, None
        if channel is not None:
            closing = asyncio.ensure_future(channel.close(grace=None))
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)

    async def _call(self, call: str, request: Any, timeout: float | None) -> Any:
        self._check_connection(call)
        self._started()
        try:
            stub, left = (
                (self._stub, timeout)
                if self._stub is not None
                else await self._ready(call, timeout)
            )
            channel = self._channel
            try:
                answer = await getattr(stub, call)(request, timeout=left, metadata=self._metadata)
            except grpc.aio.AioRpcError as e:
                raise self._failed(call, e, timeout, channel) from e
            except asyncio.CancelledError:
                cut = self._cut_off(call, channel)
                if cut is None:
                    raise
                raise cut from None
        finally:
            self._ended()
        self._answered()
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
        message = convert.create_request_to_pb(request)
        answer = await self._call("Create", message, timeout)
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
        request = pb.LastOutputRequest(name=name, lines=max(0, lines))
        try:
            answer = await self._call("LastOutput", request, self._timeout)
        except ProviderError as e:
            cause = e.__cause__
            if isinstance(cause, grpc.aio.AioRpcError) and cause.code() is UNIMPLEMENTED:
                return []
            raise
        kept = answer.lines[-min(bounded.LINES_MAX, lines or 20) :]  # the last ones asked for
        return [bounded.sentence(str(line)) for line in kept]

    async def queue_changed(self, name: str, queued: tuple[JobHint, ...]) -> None:
        """The jobs queued now for the scale set of ``name``, a runner that has not taken a
        job yet (UpdateRunner without a job)."""
        request = pb.UpdateRunnerRequest(
            runner_name=name, queued=[convert.hint_to_pb(h) for h in queued]
        )
        await self._call("UpdateRunner", request, self._timeout)
