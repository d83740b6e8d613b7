"""The emulator as a server: the Starlette app, a ticker, and ways to run it.

:class:`GitHubEmulator` builds everything from :class:`EmulatorOptions`. Use it in-process from
async tests (``async with GitHubEmulator(options) as emu:`` binds 127.0.0.1 on a free port and
serves from the test's event loop, so the test may also reach into ``emu.state``), from sync code
with :meth:`GitHubEmulator.start_in_thread`, or from the CLI (``rungar github-emulator``).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Callable
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware

from rungar.stopping import signal_free_server
from rungar.testing.github_emulator.admin import AdminRoutes
from rungar.testing.github_emulator.checks import ChecksRoutes
from rungar.testing.github_emulator.clock import EmulatorClock
from rungar.testing.github_emulator.control import ControlRoutes
from rungar.testing.github_emulator.http import CollapseSlashes
from rungar.testing.github_emulator.queue import QueueRoutes
from rungar.testing.github_emulator.rest import RestRoutes
from rungar.testing.github_emulator.state import EmulatorOptions, EmulatorState
from rungar.testing.github_emulator.webhooks import WebhookSender

TICK_SECONDS = 0.1


class GitHubEmulator:
    def __init__(
        self, options: EmulatorOptions | None = None, *, clock: EmulatorClock | None = None
    ) -> None:
        self.options = options or EmulatorOptions()
        self.clock = clock or EmulatorClock(self.options.clock_factor)
        self.webhooks: WebhookSender | None = None
        if self.options.webhook_url:
            self.webhooks = WebhookSender(self.options.webhook_url, self.options.webhook_secret)
        self.state = EmulatorState(
            self.options, self.clock, self.webhooks.send if self.webhooks else None
        )
        self.app = Starlette(
            routes=[
                *RestRoutes(self.state).routes(),
                *ChecksRoutes(self.state, RestRoutes(self.state)).routes(),
                *AdminRoutes(self.state).routes(),
                *QueueRoutes(self.state).routes(),
                *ControlRoutes(self.state, self.clock, self.webhooks).routes(),
            ],
            middleware=[Middleware(CollapseSlashes)],
        )
        self.port = 0
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None
        self._thread: threading.Thread | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._thread_loop: asyncio.AbstractEventLoop | None = None

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(TICK_SECONDS)
            self.state.tick()

    def _start_ticker(self) -> None:
        self._ticker = asyncio.create_task(self._tick())

    async def _stop_ticker(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
            self._ticker = None
        if self.webhooks is not None:
            await self.webhooks.aclose()

    @property
    def scheme(self) -> str:
        return "https" if self.options.tls_cert_file else "http"

    def url_for(self, host: str) -> str:
        """The base URL at ``host`` (a name or address that reaches the emulator)."""
        return f"{self.scheme}://{host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The base URL clients are given: at ``public_host`` when set, else 127.0.0.1."""
        return self.url_for(self.options.public_host or "127.0.0.1")

    @property
    def org_url(self) -> str:
        """The config URL Rungar is given: GHES-style, so REST goes to ``/api/v3``."""
        return f"{self.base_url}/{self.options.owner}"

    def _server_for(self, sock: socket.socket) -> uvicorn.Server:
        options = self.options
        tls: dict[str, Any] = {}
        if options.tls_cert_file:
            tls = {"ssl_certfile": options.tls_cert_file, "ssl_keyfile": options.tls_key_file}
        config = uvicorn.Config(
            self.app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1, **tls
        )
        server: uvicorn.Server = signal_free_server(config)  # the command owns the signals
        self.port = sock.getsockname()[1]
        return server

    @staticmethod
    def _bind(host: str, port: int) -> socket.socket:
        # proto must be TCP for asyncio to set TCP_NODELAY on accepted sockets; with proto 0
        # every answer (headers, then body) waits out a 40 ms delayed ACK.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        return sock

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve from the running loop; returns the base URL once it accepts connections."""
        sock = self._bind(host, port)
        self._server = self._server_for(sock)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        self._start_ticker()
        while not self._server.started:
            if self._task.done():
                self._task.result()
            await asyncio.sleep(0.01)
        return self.base_url

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self.state.close()  # long polls in flight answer now, so shutdown is prompt
            await asyncio.sleep(0)
            self._server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._task, timeout=5)
        await self._stop_ticker()
        self._server = self._task = None

    async def __aenter__(self) -> GitHubEmulator:
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()

    def start_in_thread(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve from a background thread with its own loop (for sync callers)."""
        sock = self._bind(host, port)
        self._server = self._server_for(sock)
        server = self._server

        async def serve() -> None:
            self._thread_loop = asyncio.get_running_loop()
            self._start_ticker()
            try:
                await server.serve(sockets=[sock])
            finally:
                await self._stop_ticker()

        self._thread = threading.Thread(target=lambda: asyncio.run(serve()), daemon=True)
        self._thread.start()
        while not server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the GitHub emulator failed to start")
            threading.Event().wait(0.01)
        return self.base_url

    def stop_thread(self) -> None:
        if self._server is not None:
            if self._thread_loop is not None:  # the state lives on the server's loop
                self._thread_loop.call_soon_threadsafe(self.state.close)
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server, self._thread = None, None

    async def serve_forever(
        self, host: str, port: int, ready: Callable[[str], None] | None = None
    ) -> None:
        """For the CLI: serve until cancelled; ``ready`` gets the bound base URL."""
        sock = self._bind(host, port)
        server = self._server_for(sock)
        self._start_ticker()
        task = asyncio.create_task(server.serve(sockets=[sock]))
        try:
            while not server.started and not task.done():
                await asyncio.sleep(0.01)
            if ready is not None and server.started:
                ready(self.url_for(self.options.public_host or host))
            await task
        finally:
            await self._stop_ticker()
