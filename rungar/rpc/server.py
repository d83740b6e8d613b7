"""The provider server kit: any :class:`~rungar.model.provider.Provider` served over gRPC.

``await serve(provider, address, tls=..., token=...)`` starts a grpc.aio server carrying
``rungar.provider.v1.Provider`` beside the standard ``grpc.health.v1.Health`` and reflection
services, and returns a :class:`ProviderServer` handle to stop it. runnerd, the cloud providers
and the scripted fake are all served this way (ARCHITECTURE §1, §2).

Security (ARCHITECTURE §6): plaintext only on ``unix://`` addresses (``serve`` refuses to start
otherwise); TLS with ``client_ca_file`` requires client certificates (mTLS); a token is checked
in constant time on every call but health checks, which tell nothing and serve probes.
Messages are capped at 1 MiB both ways. Every call is logged once as ``provider.call`` with
the call, the runner, the result and the duration; request bodies are never logged, so the
JIT config (a secret) cannot leak through here, and a provider's exception is logged by type
and message only (a rendered traceback could show frame locals holding the request).
"""

from __future__ import annotations

import hmac
import os
import stat
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import grpc.aio
import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from rungar.clock import Clock, SystemClock
from rungar.errors import ConfigError, ProviderError, ProviderUnavailable
from rungar.model.machine import Created
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


class _Servicer(pb_grpc.ProviderServicer):  # type: ignore[misc]  # generated base is untyped
    """Converts each call to model values, asks the provider, logs one line, converts back."""

    def __init__(self, provider: Provider, clock: Clock) -> None:
        self._provider = provider
        self._clock = clock

    async def _answer(
        self,
        call: str,
        runner: str,
        context: grpc.aio.ServicerContext[Any, Any],
        work: Callable[[], Awaitable[tuple[Any, str]]],
    ) -> Any:
        started = self._clock.now()
        result = "error"
        try:
            answer, result = await work()
            return answer
        except ProviderUnavailable as e:
            result = "unavailable"
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(e))
        except ProviderError as e:
            await context.abort(grpc.StatusCode.INTERNAL, str(e))
        except Exception as e:
            result = f"error: {type(e).__name__}"
            log.error("provider.failed", call=call, runner=runner, error=f"{type(e).__name__}: {e}")
            await context.abort(grpc.StatusCode.INTERNAL, f"{type(e).__name__}: {e}")
        finally:
            log.info(
                "provider.call",
                call=call,
                runner=runner,
                result=result,
                duration=round(self._clock.now() - started, 6),
            )

    async def Info(self, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        async def work() -> tuple[Any, str]:
            return convert.info_to_pb(await self._provider.info()), "ok"

        return await self._answer("Info", "", context, work)

    async def ValidateRunner(
        self, request: Any, context: grpc.aio.ServicerContext[Any, Any]
    ) -> Any:
        async def work() -> tuple[Any, str]:
            block = convert.runner_from_pb(request.runner).to_mapping()
            problems = await self._provider.validate_runner(block)
            return pb.ValidateRunnerResponse(problems=problems), f"{len(problems)} problems"

        return await self._answer("ValidateRunner", "", context, work)

    async def Create(self, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        async def work() -> tuple[Any, str]:
            outcome = await self._provider.create(convert.create_request_from_pb(request))
            result = "created" if isinstance(outcome, Created) else f"refused {outcome.kind}"
            return convert.create_response_to_pb(outcome), result

        return await self._answer("Create", str(request.runner_name), context, work)

    async def Delete(self, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        async def work() -> tuple[Any, str]:
            await self._provider.delete(str(request.name))
            return pb.DeleteResponse(), "ok"

        return await self._answer("Delete", str(request.name), context, work)

    async def List(self, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        async def work() -> tuple[Any, str]:
            machines = await self._provider.list(dict(request.selector))
            answer = pb.ListResponse(machines=[convert.machine_to_pb(m) for m in machines])
            return answer, f"{len(machines)} machines"

        return await self._answer("List", "", context, work)

    async def UpdateRunner(self, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        async def work() -> tuple[Any, str]:
            job = convert.hint_from_pb(request.job)
            await self._provider.update_runner(str(request.runner_name), job)
            return pb.UpdateRunnerResponse(), "ok"

        return await self._answer("UpdateRunner", str(request.runner_name), context, work)


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


async def serve(
    provider: Provider,
    address: str,
    tls: ServerTls | None = None,
    token: str = "",
    *,
    clock: Clock | None = None,
) -> ProviderServer:
    """Start serving ``provider`` at ``address``; returns once it listens.

    ``address`` is ``unix:///path`` (plaintext allowed) or ``host:port`` (``tls`` required;
    port 0 picks a free one, see :attr:`ProviderServer.address`). ``token``, when set, must be
    presented by every client and needs TLS.
    """
    check_address(address, secured=tls is not None, who="provider server")
    if token and tls is None:
        raise ConfigError(["provider server: a token is only ever accepted over TLS"])
    interceptors = [_TokenCheck(token)] if token else []
    server = grpc.aio.server(options=list(SERVER_OPTIONS), interceptors=interceptors)
    pb_grpc.add_ProviderServicer_to_server(_Servicer(provider, clock or SystemClock()), server)
    # grpc-stubs predate health.aio, the asyncio servicer grpc_health ships.
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
