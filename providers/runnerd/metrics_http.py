"""Serving runnerd's metrics (:mod:`runnerd.metrics`) on ``[host] metrics_listen``.

Access follows the provider channel's rule: a loopback address serves plain HTTP; any other
needs ``tls_cert`` and ``tls_key`` (the config check refuses it otherwise), and then, as the
provider channel over TCP, a client certificate from ``tls_ca`` when it is set, or else the
bearer token of ``token_file``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ssl
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from rungar.stopping import signal_free_server
from runnerd.config import HostConfig, is_loopback, split_address
from runnerd.metrics import CONTENT_TYPE, RunnerdMetrics


def app(metrics: RunnerdMetrics, token: str = "") -> Starlette:
    expected = f"Bearer {token}".encode() if token else b""

    async def get_metrics(request: Request) -> Response:
        if expected:
            given = request.headers.get("authorization", "").encode()
            if not hmac.compare_digest(given, expected):
                return PlainTextResponse("a bearer token is required\n", status_code=401)
        return Response(metrics.text(), media_type=CONTENT_TYPE)

    return Starlette(routes=[Route("/metrics", get_metrics)])


class MetricsServer:
    def __init__(self, server: uvicorn.Server, task: asyncio.Task[None]) -> None:
        self._server = server
        self.task = task

    @property
    def port(self) -> int:
        """The bound port (the one asked for, or the one the system chose for port 0)."""
        for server in self._server.servers:
            for sock in server.sockets:
                return int(sock.getsockname()[1])
        return 0

    async def stop(self) -> None:
        self._server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


async def serve_metrics(metrics: RunnerdMetrics, host: HostConfig) -> MetricsServer:
    """Serve ``/metrics`` on ``host.metrics_listen`` under the provider channel's access rule."""
    address, port = split_address(host.metrics_listen)
    options: dict[str, object] = {}
    token = ""
    if not is_loopback(host.metrics_listen):
        options = {"ssl_certfile": host.tls_cert, "ssl_keyfile": host.tls_key}
        if host.tls_ca:
            options |= {"ssl_ca_certs": host.tls_ca, "ssl_cert_reqs": ssl.CERT_REQUIRED}
        elif host.token_file:
            token = Path(host.token_file).read_text().strip()
    config = uvicorn.Config(
        app(metrics, token), host=address, port=port, log_level="warning", lifespan="off",
        **options,  # type: ignore[arg-type]  # uvicorn's keyword types, checked by it at start
    )  # fmt: skip
    server: uvicorn.Server = signal_free_server(config)  # the daemon owns the signals
    task = asyncio.create_task(server.serve())
    for _ in range(500):
        if server.started or task.done():
            break
        await asyncio.sleep(0.01)
    if task.done():
        task.result()  # the bind failed: raise why
        raise OSError(f"metrics_listen {host.metrics_listen}: the listener stopped")
    return MetricsServer(server, task)
