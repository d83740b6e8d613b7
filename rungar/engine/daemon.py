"""``rungar serve``: the daemon's wiring — settings, providers, GitHub, state, loops, servers.

SIGTERM or SIGINT stops it cleanly: the loops stop, the listeners close their sessions, state
is saved, and every runner is left in place for the next daemon to adopt.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import structlog

from rungar.clock import Clock, SystemClock
from rungar.config.loader import load_scale_sets
from rungar.config.model import ProviderConfig, Timing
from rungar.engine.control import Control
from rungar.engine.engine import Engine
from rungar.engine.events import EventLog
from rungar.engine.metrics import Metrics
from rungar.engine.naming import installation_id
from rungar.engine.runloop import RunLoop
from rungar.engine.settings import DaemonSettings, read_secret
from rungar.errors import ConfigError
from rungar.model.machine import Created, CreateRequest, JobHint, Machine, ProviderInfo, Refusal
from rungar.model.provider import Provider
from rungar.model.units import parse_bytes
from rungar.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from rungar.rpc.client import GrpcProvider
    from rungar.rpc.plugin import PluginProcess

log = structlog.get_logger("rungar.daemon")


class StoreCursors:
    """The listener's last message ids, kept in the state database."""

    def __init__(self, store: SqliteStore) -> None:
        self.store = store

    async def get_last_message_id(self, scale_set_id: int) -> int:
        return self.store.last_message_id(str(scale_set_id))

    async def set_last_message_id(self, scale_set_id: int, message_id: int) -> None:
        self.store.set_last_message_id(str(scale_set_id), message_id)


def plugin_settings(config: ProviderConfig, installation: str) -> dict[str, Any]:
    """What a plugin is handed: its type's keys as written in scale_sets.yaml, its name and the
    installation (when known), so the user writes them once. A third-party type's own keys go
    too: its plugin reads them the same way. Never logged (gcp's and aws's keys hold
    credential file paths, not secrets, but another type's might)."""
    handed = dict(config.options)
    handed["name"] = config.name
    if installation:
        handed["installation"] = installation
    return handed


def make_provider(
    config: ProviderConfig, clock: Clock, plugins: list[Any], installation: str = ""
) -> Provider:
    """A provider of any type: in-process fake, gRPC address, or a local plugin to start
    (handed :func:`plugin_settings`)."""
    options = config.options
    if config.type == "fake" and not config.address and not config.command:
        from rungar.testing.fake_provider import FakeProvider

        vcpus = float(options.get("vcpus", 1e9))
        memory = parse_bytes(options["memory"]) if "memory" in options else 10**18
        return FakeProvider(config.name, vcpus=vcpus, memory_bytes=memory, clock=clock)
    from rungar.rpc.client import GrpcProvider
    from rungar.rpc.tls import ClientTls

    tls_options = options.get("tls") or {}
    tls = ClientTls(**tls_options) if tls_options else None
    token = Path(options["token_file"]).read_text().strip() if options.get("token_file") else ""
    timeout = config.timeout or 10.0
    if config.command:
        from rungar.rpc.plugin import PluginProcess

        plugin = PluginProcess(
            list(config.command),
            name=config.name,
            clock=clock,
            settings=plugin_settings(config, installation),
        )
        plugins.append(plugin)
        return PluginProvider(config.name, plugin, timeout)
    return GrpcProvider(config.name, config.address, tls=tls, token=token, timeout=timeout)


async def connect_provider(
    config: ProviderConfig, clock: Clock, plugins: list[Any], installation: str = ""
) -> Provider:
    """:func:`make_provider`, its plugin started: for a provider added by ``rungar apply``."""
    provider = make_provider(config, clock, plugins, installation)
    if isinstance(provider, PluginProvider):
        await provider.start()
    return provider


class PluginProvider:
    """A provider served by a plugin process the daemon starts (``command:``): every call goes
    to the plugin's gRPC client. The plugin keeps its address across restarts, so one client
    lasts the daemon's life."""

    def __init__(self, name: str, plugin: PluginProcess, timeout: float) -> None:
        self.name = name
        self.plugin = plugin
        self.timeout = timeout
        self._client: GrpcProvider | None = None

    async def start(self) -> None:
        from rungar.rpc.client import GrpcProvider

        address = await self.plugin.start()
        self._client = GrpcProvider(self.name, address, timeout=self.timeout)

    @property
    def client(self) -> GrpcProvider:
        if self._client is None:
            raise RuntimeError(f"provider {self.name}: its plugin was not started")
        return self._client

    async def info(self) -> ProviderInfo:
        return await self.client.info()

    async def validate_runner(self, runner: Mapping[str, Any]) -> list[str]:
        return await self.client.validate_runner(runner)

    async def create(self, request: CreateRequest) -> Created | Refusal:
        return await self.client.create(request)

    async def delete(self, name: str) -> None:
        await self.client.delete(name)

    async def list(self, selector: Mapping[str, str]) -> list[Machine]:
        return await self.client.list(selector)

    async def update_runner(self, name: str, job: JobHint) -> None:
        await self.client.update_runner(name, job)

    async def close(self) -> None:
        """Close the client and stop the plugin (the daemon stops it again at exit: harmless)."""
        if self._client is not None:
            await self._client.close()
        await self.plugin.stop()


class Daemon:
    # The control surface of each daemon running in this process, by admin socket: the demo
    # shows its live view from it without going through the socket.
    running: ClassVar[dict[str, Control]] = {}

    def __init__(self, settings: DaemonSettings, clock: Clock | None = None) -> None:
        self.settings = settings
        self.clock = clock or SystemClock()
        self.warnings: list[str] = []
        self.timing = Timing()
        self._webhook_task: asyncio.Task[None] | None = None  # kept: the loop holds tasks weakly

    def _github(self, store: SqliteStore, metrics: Metrics) -> Any:
        from rungar.github.auth import AppAuth, PatAuth
        from rungar.github.service import ScaleSetGitHub

        gh = self.settings.github
        auth: Any
        if gh.app_private_key_path:
            auth = AppAuth(
                gh.app_client_id,
                gh.app_installation_id,
                read_secret(gh.app_private_key_path, self.warnings),
            )
        elif gh.token_path:
            auth = PatAuth(read_secret(gh.token_path, self.warnings))
        else:
            import os

            token = os.environ.get(gh.token_env, "")
            if not token:
                raise ConfigError([f"github.token_env: ${gh.token_env} is empty or unset"])
            auth = PatAuth(token)
        return ScaleSetGitHub(
            gh.url,
            auth,
            self.clock,
            cursors=StoreCursors(store),
            long_poll_timeout=gh.long_poll_timeout,
            session_retry_first=self.timing.session_retry_first,
            session_retry_max=self.timing.session_retry_max,
        )

    def _bind_webhook(self) -> tuple[socket.socket, str] | None:
        """The optional ``workflow_job`` receiver's socket and secret, taken before anything
        starts: a missing secret or a port in use stops the daemon with its reason."""
        hook = self.settings.webhook
        if not hook.listen:
            return None
        if not hook.secret_path:
            raise ConfigError(["webhook.secret_path: a secret is required to receive webhooks"])
        try:
            secret = read_secret(hook.secret_path, self.warnings)
        except OSError as e:
            raise ConfigError([f"webhook.secret_path: cannot read {hook.secret_path}: {e}"]) from e
        host, _, port = hook.listen.rpartition(":")
        host = host.strip("[]") or "127.0.0.1"
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            return socket.create_server((host, int(port)), family=family), secret
        except (OSError, ValueError) as e:
            raise ConfigError([f"webhook.listen: cannot listen on {hook.listen}: {e}"]) from e

    def _serve_webhook(
        self, bound: tuple[socket.socket, str], engine: Engine, runloop: RunLoop
    ) -> Any:
        """A delivery wakes the scale sets it matches, which then try again at once instead of
        at the next message or reconcile pass."""
        import uvicorn

        from rungar.github.webhook import WebhookReceiver

        sock, secret = bound
        labels = {name: list(s.config.labels) or [name] for name, s in engine.sets.items()}

        def wake(names: Sequence[str], job: object) -> None:
            for name in names:
                engine.spawn(engine.scale(name))
            runloop.wake()

        def count(outcome: str) -> None:
            engine.metrics.webhook_deliveries.labels(outcome).inc()

        receiver = WebhookReceiver(
            secret, labels, wake, max_body=self.settings.webhook.max_body_bytes, on_outcome=count
        )
        server = uvicorn.Server(uvicorn.Config(receiver.app(), log_level="warning", lifespan="off"))
        self._webhook_task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]))
        return server

    async def run(self, stop: asyncio.Event | None = None) -> None:
        settings = self.settings
        config = load_scale_sets(settings.scale_sets)
        webhook_socket = self._bind_webhook()
        state_dir = Path(settings.state_dir)
        state_dir.mkdir(parents=True, exist_ok=True)
        store = SqliteStore(state_dir / "state.db", now=self.clock.now)
        events = EventLog(
            self.clock,
            Path(settings.events.file) if settings.events.file else state_dir / "events.jsonl",
            max_count=settings.events.max_count,
            max_age=settings.events.max_age,
        )
        metrics = Metrics()
        metrics.start_time.set(self.clock.now())
        self.timing = config.timing
        github = self._github(store, metrics)
        for warning in self.warnings:
            log.warning(warning)
        installation = settings.installation or installation_id(settings.github.url)
        plugins: list[Any] = []
        providers = {
            p.name: make_provider(p, self.clock, plugins, installation) for p in config.providers
        }
        for provider in providers.values():
            if isinstance(provider, PluginProvider):
                await provider.start()
        engine = Engine(
            config,
            providers,
            github,
            clock=self.clock,
            store=store,
            events=events,
            metrics=metrics,
            installation=installation,
            max_parallel_creates=settings.max_parallel_creates,
        )
        engine.github_url = settings.github.url
        runloop = RunLoop(engine)
        control = Control(
            engine,
            runloop,
            provider_factory=lambda p: connect_provider(p, self.clock, plugins, installation),
        )
        from rungar.rpc.admin_server import serve_admin

        Daemon.running[settings.socket] = control
        admin = await serve_admin(
            control, settings.socket, mode=settings.socket_mode, clock=self.clock
        )
        if settings.metrics.listen:
            metrics.serve(settings.metrics.listen)
        webhook = self._serve_webhook(webhook_socket, engine, runloop) if webhook_socket else None
        await runloop.start()
        log.info(
            "daemon.started",
            scale_sets=len(config.scale_sets),
            providers=len(config.providers),
            installation=engine.installation,
        )
        stop = stop or asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        try:
            await stop.wait()
        finally:
            log.info("daemon.stopping", note="every runner is left in place")
            Daemon.running.pop(settings.socket, None)
            await runloop.stop()
            await admin.stop()
            if webhook is not None and self._webhook_task is not None:
                webhook.should_exit = True
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self._webhook_task, 5.0)
            with contextlib.suppress(Exception):
                await github.aclose()
            for plugin in plugins:
                with contextlib.suppress(Exception):
                    await plugin.stop()
            for provider in providers.values():
                close = getattr(provider, "close", None)
                if close is not None:
                    with contextlib.suppress(Exception):
                        await close()
            events.close()
            store.close()
