"""The provider server kit: any :class:`~rungar.model.provider.Provider` served over gRPC.

``await serve(provider, address, tls=..., token=...)`` starts a grpc.aio server carrying
``rungar.provider.v1.Provider`` beside the standard ``grpc.health.v1.Health`` and reflection
services, and returns a :class:`ProviderServer` handle to stop it. runnerd, the cloud providers
and the scripted fake are all served this way (docs/architecture.md).

Security: plaintext only on ``unix://`` addresses (``serve`` refuses to start
otherwise); TLS with ``client_ca_file`` requires client certificates (mTLS); a token is checked
in constant time on every call but health checks, which tell nothing and serve probes. A TCP
listener needs one of the two: TLS alone proves the server to its clients but lets anyone who
reaches the port create runners, so ``serve`` refuses it unless the caller passes the loudly
named ``insecure_no_client_auth=True``, and then warns at every start.
Messages are capped at 1 MiB both ways. Every call is logged once as ``provider.call`` with
the call, the runner, the result, the duration and the caller its metadata names (installation,
daemon host, daemon start; :mod:`rungar.model.caller`), which is also the provider method's
:func:`~rungar.model.caller.current_caller` and bound as ``caller`` on the provider's own log
lines during the call; request bodies are never logged, so the
JIT config (a secret) cannot leak through here, and a provider's exception is logged by type
and message only (a rendered traceback could show frame locals holding the request).
"""

from __future__ import annotations

import contextvars
import functools
import hmac
import os
import stat
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NoReturn

import grpc
import grpc.aio
import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from rungar.clock import Clock, SystemClock
from rungar.errors import ConfigError, ProviderError, ProviderUnavailable
from rungar.model.caller import Caller, current_caller, reset_current_caller, set_current_caller
from rungar.model.machine import Created, RefusalKind
from rungar.model.provider import Provider
from rungar.rpc import convert
from rungar.rpc._gen.rungar.provider.v1 import provider_pb2 as pb
from rungar.rpc._gen.rungar.provider.v1 import provider_pb2_grpc as pb_grpc
from rungar.rpc.client import MAX_MESSAGE_BYTES
from rungar.rpc.tls import ServerTls, check_address, is_unix, server_credentials, unix_path

SERVICE_NAME: str = pb.DESCRIPTOR.services_by_name["Provider"].full_name
_HEALTH_PREFIX = f"/{health.SERVICE_NAME}/"
SERVER_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    # Clients ping every 30 s during calls (rungar.rpc.client); accept that, not more.
    ("grpc.http2.min_ping_interval_without_data_ms", 20_000),
    # Two servers on one port would split calls between them; fail the second bind instead.
    ("grpc.so_reuseport", 0),
)

log = structlog.get_logger("rungar.rpc.server")


class _CallLog:
    """The logger of ``provider.call`` lines, assembled once per structlog configuration.

    A module's structlog proxy assembles a new logger (wrapper, context, output) for every line
    so that it follows ``structlog.configure``; the server logs every call, so it keeps the
    assembled one while the configuration it came from stays in place (compared by identity;
    ``capture_logs`` edits the processor list in place, which the kept logger sees).
    """

    def __init__(self) -> None:
        self._config: dict[str, Any] = {}
        self._logger: Any = None

    def info(self, event: str, **fields: Any) -> None:
        config = structlog.get_config()
        kept = self._config
        if (
            self._logger is None
            or config["processors"] is not kept["processors"]
            or config["wrapper_class"] is not kept["wrapper_class"]
            or config["context_class"] is not kept["context_class"]
            or config["logger_factory"] is not kept["logger_factory"]
        ):
            self._logger, self._config = log.bind(), config
        self._logger.info(event, **fields)


_call_log = _CallLog()
# What _begin hands _log_call to undo: the current caller, and the log context bound for it.
_Token = tuple[contextvars.Token[Caller | None], Mapping[str, contextvars.Token[Any]]]
# The result words of a refused Create, made once rather than formatted on every call.
_REFUSED = {kind: f"refused {kind}" for kind in RefusalKind}


@functools.lru_cache(maxsize=64)
def _caller_of(metadata: tuple[tuple[str, str | bytes], ...]) -> tuple[Caller | None, str]:
    """The caller a call's metadata names, and its description for the log: read once for
    each daemon, whose calls all carry the same metadata."""
    caller = Caller.from_metadata(metadata)
    return caller, caller.describe() if caller is not None else ""


class ProviderServer:
    """A running provider server. ``address`` is where it listens, with the real port."""

    def __init__(self, server: grpc.aio.Server, address: str, health_servicer: Any) -> None:
        self._server = server
        self._health = health_servicer
        self.address = address

    async def stop(self, grace: float | None = 1.0) -> None:
        """Stop taking calls; calls in flight get ``grace`` seconds to finish."""
        await self._health.enter_graceful_shutdown()
        await self._server.stop(grace)

    async def wait(self) -> None:
        await self._server.wait_for_termination()

    async def __aenter__(self) -> ProviderServer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


class _TokenCheck(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]  # stubs' generics
    """Refuses calls without ``authorization: Bearer <token>``, comparing in constant time."""

    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any]]
        ],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any]:
        handler = await continuation(handler_call_details)
        if handler_call_details.method.startswith(_HEALTH_PREFIX):
            return handler
        presented = b""
        for key, value in handler_call_details.invocation_metadata or ():
            if key == "authorization":
                presented = value.encode() if isinstance(value, str) else value
        if hmac.compare_digest(presented, self._expected):
            return handler
        return _refusing_handler(handler)


def _refusing_handler(
    handler: grpc.RpcMethodHandler[Any, Any] | None,
) -> grpc.RpcMethodHandler[Any, Any]:
    async def refuse(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")

    async def refuse_stream(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")
        yield  # pragma: no cover - makes this an async generator, as streaming handlers are

    request_streaming = handler is not None and handler.request_streaming
    response_streaming = handler is not None and handler.response_streaming
    if request_streaming and response_streaming:
        return grpc.stream_stream_rpc_method_handler(refuse_stream)
    if request_streaming:
        return grpc.stream_unary_rpc_method_handler(refuse)
    if response_streaming:
        return grpc.unary_stream_rpc_method_handler(refuse_stream)
    return grpc.unary_unary_rpc_method_handler(refuse)


def _failure(e: Exception) -> str:
    """The ``result`` a failed call is logged with."""
    if isinstance(e, ProviderUnavailable):
        return "unavailable"
    if isinstance(e, ProviderError):
        return "error"
    return f"error: {type(e).__name__}"


async def _abort(
    call: str, runner: str, context: grpc.aio.ServicerContext[Any, Any], e: Exception
) -> NoReturn:
    """Ends a failed call with its status: UNAVAILABLE for "no answer", INTERNAL otherwise."""
    if isinstance(e, ProviderUnavailable):
        await context.abort(grpc.StatusCode.UNAVAILABLE, str(e))
    if isinstance(e, ProviderError):
        await context.abort(grpc.StatusCode.INTERNAL, str(e))
    log.error("provider.failed", call=call, runner=runner, error=f"{type(e).__name__}: {e}")
    await context.abort(grpc.StatusCode.INTERNAL, f"{type(e).__name__}: {e}")


class _Servicer(pb_grpc.ProviderServicer):  # type: ignore[misc]  # generated base is untyped
    """Converts each call to model values, asks the provider, logs one line, converts back.

    Every handler has the same shape: time the call, convert inside the ``try`` (a request the
    model refuses is mapped like any provider failure), map a failure to its status with
    :func:`_abort`, and log one ``provider.call`` line in ``finally``. The shape is written out
    in each handler rather than shared through a wrapper coroutine: a provider call is cheap
    next to gRPC's own work, and two extra coroutines per call measurably slowed the server.
    """

    def __init__(self, provider: Provider, clock: Clock) -> None:
        self._provider = provider
        self._clock = clock

    def _begin(self, context: grpc.aio.ServicerContext[Any, Any]) -> tuple[float, _Token]:
        """When the call started, and its caller made current (provider.proto's metadata)."""
        caller, described = _caller_of(tuple(context.invocation_metadata() or ()))
        tokens = structlog.contextvars.bind_contextvars(caller=described) if caller else {}
        return self._clock.now(), (set_current_caller(caller), tokens)

    def _log_call(self, call: str, runner: str, result: str, started: float, token: _Token) -> None:
        duration = round(self._clock.now() - started, 6)
        caller = current_caller()
        caller_token, log_tokens = token
        reset_current_caller(caller_token)
        if log_tokens:
            structlog.contextvars.reset_contextvars(**log_tokens)
        if caller is None:
            _call_log.info(
                "provider.call", call=call, runner=runner, result=result, duration=duration
            )
            return
        _call_log.info(
            "provider.call",
            call=call,
            runner=runner,
            result=result,
            duration=duration,
            installation=caller.installation,
            daemon_host=caller.host,
            daemon_started_at=caller.started_at,
        )

    async def Info(self, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        started, token = self._begin(context)
        result = "error"
        try:
            answer = convert.info_to_pb(await self._provider.info())
            result = "ok"
            return answer
        except Exception as e:
            result = _failure(e)
            await _abort("Info", "", context, e)
        finally:
            self._log_call("Info", "", result, started, token)

    async def ValidateRunner(
        self, request: Any, context: grpc.aio.ServicerContext[Any, Any]
    ) -> Any:
        started, token = self._begin(context)
        result = "error"
        try:
            block = convert.runner_from_pb(request.runner).to_mapping()
            problems = await self._provider.validate_runner(block)
            result = f"{len(problems)} problems"
            return pb.ValidateRunnerResponse(problems=problems)
        except Exception as e:
            result = _failure(e)
            await _abort("ValidateRunner", "", context, e)
        finally:
            self._log_call("ValidateRunner", "", result, started, token)

    async def Create(self, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        runner = request.runner_name
        started, token = self._begin(context)
        result = "error"
        try:
            outcome = await self._provider.create(convert.create_request_from_pb(request))
            result = "created" if isinstance(outcome, Created) else _REFUSED[outcome.kind]
            return convert.create_response_to_pb(outcome)
        except Exception as e:
            result = _failure(e)
            await _abort("Create", runner, context, e)
        finally:
            self._log_call("Create", runner, result, started, token)

    async def Delete(self, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        runner = request.name
        started, token = self._begin(context)
        result = "error"
        try:
            await self._provider.delete(runner, convert.removal_from_pb(request))
            result = "ok"
            return pb.DeleteResponse()
        except Exception as e:
            result = _failure(e)
            await _abort("Delete", runner, context, e)
        finally:
            self._log_call("Delete", runner, result, started, token)

    async def List(self, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        started, token = self._begin(context)
        result = "error"
        try:
            machines = await self._provider.list(dict(request.selector))
            answer = pb.ListResponse(machines=[convert.machine_to_pb(m) for m in machines])
            result = f"{len(machines)} machines"
            return answer
        except Exception as e:
            result = _failure(e)
            await _abort("List", "", context, e)
        finally:
            self._log_call("List", "", result, started, token)

    async def UpdateRunner(self, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        runner = request.runner_name
        started, token = self._begin(context)
        result = "error"
        try:
            if request.HasField("job"):
                await self._provider.update_runner(runner, convert.hint_from_pb(request.job))
            else:
                # A queue update for a waiting runner: only a provider that follows queues
                # (it has queue_changed) reads it; the others answer OK.
                follow = getattr(self._provider, "queue_changed", None)
                if follow is not None:
                    await follow(runner, convert.hints_from_pb(request.queued))
            result = "ok"
            return pb.UpdateRunnerResponse()
        except Exception as e:
            result = _failure(e)
            await _abort("UpdateRunner", runner, context, e)
        finally:
            self._log_call("UpdateRunner", runner, result, started, token)

    async def LastOutput(self, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        runner = request.name
        started, token = self._begin(context)
        result = "error"
        try:
            lines = await self._provider.last_output(runner, int(request.lines) or 20)
            result = f"{len(lines)} lines"
            return pb.LastOutputResponse(lines=[str(line) for line in lines])
        except Exception as e:
            result = _failure(e)
            await _abort("LastOutput", runner, context, e)
        finally:
            self._log_call("LastOutput", runner, result, started, token)


def _bind(server: grpc.aio.Server, address: str, tls: ServerTls | None) -> str:
    if is_unix(address):
        path = unix_path(address)
        # A socket left by a crashed run would make the bind fail; anything else we keep.
        if os.path.exists(path) and stat.S_ISSOCK(os.stat(path).st_mode):
            os.unlink(path)
    try:
        if tls is None:
            port = server.add_insecure_port(address)
        else:
            port = server.add_secure_port(address, server_credentials(tls))
    except RuntimeError as e:
        raise ProviderError(f"cannot listen on {address}: {e}") from e
    if not is_unix(address):
        if port == 0:
            raise ProviderError(f"cannot listen on {address}")
        return f"{address.rsplit(':', 1)[0]}:{port}"
    return address


NO_CLIENT_AUTH = (
    "gRPC over TCP needs client authentication: set a client CA (mutual TLS) or a token file; "
    "without either anyone who reaches the port can create and delete runners"
)


def check_client_auth(
    address: str,
    tls: ServerTls | None,
    token: str,
    *,
    insecure_no_client_auth: bool = False,
    who: str = "provider server",
) -> None:
    """Refuse a TCP listener that would serve anonymous clients; warn when the operator opted out.

    A unix socket is guarded by its file mode and needs neither. The opt-out is logged as a
    warning each time, so it cannot be forgotten in a config file nobody reads.
    """
    if is_unix(address) or token or (tls is not None and tls.client_ca_file):
        return
    if not insecure_no_client_auth:
        raise ConfigError([f"{who}: {address}: {NO_CLIENT_AUTH}"])
    log.warning(
        "provider.insecure_no_client_auth",
        address=address,
        note="clients are not authenticated: anyone who reaches this port can run jobs here",
    )


async def serve(
    provider: Provider,
    address: str,
    tls: ServerTls | None = None,
    token: str = "",
    *,
    clock: Clock | None = None,
    insecure_no_client_auth: bool = False,
) -> ProviderServer:
    """Start serving ``provider`` at ``address``; returns once it listens.

    ``address`` is ``unix:///path`` (plaintext allowed) or ``host:port`` (``tls`` required;
    port 0 picks a free one, see :attr:`ProviderServer.address`). ``token``, when set, must be
    presented by every client and needs TLS. Over TCP the clients must be authenticated, by
    ``tls.client_ca_file`` (mTLS) or ``token``, unless ``insecure_no_client_auth`` says the
    operator chose otherwise (see :func:`check_client_auth`).
    """
    check_address(address, secured=tls is not None, who="provider server")
    if token and tls is None:
        raise ConfigError(["provider server: a token is only ever accepted over TLS"])
    check_client_auth(address, tls, token, insecure_no_client_auth=insecure_no_client_auth)
    interceptors = [_TokenCheck(token)] if token else []
    server = grpc.aio.server(options=list(SERVER_OPTIONS), interceptors=interceptors)
    pb_grpc.add_ProviderServicer_to_server(_Servicer(provider, clock or SystemClock()), server)
    # grpc-stubs predate health.aio, the asyncio servicer grpc_health ships.
    # why the ignore[attr-defined] below: see the comment above
    health_servicer = health.aio.HealthServicer()  # type: ignore[attr-defined]
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        [SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME], server
    )
    bound = _bind(server, address, tls)
    await server.start()
    for service in ("", SERVICE_NAME):
        await health_servicer.set(service, health_pb2.HealthCheckResponse.SERVING)
    log.info("provider.serving", address=bound, tls=tls is not None, token=bool(token))
    return ProviderServer(server, bound, health_servicer)
