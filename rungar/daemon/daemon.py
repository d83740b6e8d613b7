"""``rungar serve``: the daemon's wiring — settings, providers, GitHub, state, loops, servers.

This is the composition root: it builds the :class:`~rungar.engine.engine.Engine` and hands
the parts it serves (the run loop, the admin control, readiness, the webhook) only what each
reads, so this module alone holds the whole engine.

SIGTERM or SIGINT stops it cleanly: the loops stop, the listeners close their sessions, state
is saved, and every runner is left in place for the next daemon to adopt.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from rungar.clock import Clock, SystemClock
from rungar.config.loader import load_scale_sets
from rungar.config.model import ProviderConfig, ScaleSetsFile, Timing
from rungar.daemon.control import Control
from rungar.daemon.lease import LeaseKeeper
from rungar.daemon.provider_kinds import ProviderKinds
from rungar.daemon.providers import (
    PluginProvider,
    close_providers,
    connect_provider,
    make_provider,
)
from rungar.daemon.readiness import ReadinessReporter
from rungar.daemon.runloop import RunLoop
from rungar.daemon.settings import (
    DaemonSettings,
    MetricsSettings,
    github_network,
    read_secret,
    where_key,
)
from rungar.engine.core.naming import installation_id
from rungar.engine.engine import Engine
from rungar.engine.jobs.accounting import Accounting
from rungar.engine.reconcile.runner_versions import restore_releases, watch_latest_release
from rungar.engine.report.events import EventLog
from rungar.engine.report.metrics import Metrics
from rungar.errors import ConfigError, ProviderError
from rungar.github.registrations import RegistrationQueue
from rungar.model.caller import Caller
from rungar.model.provider import Provider
from rungar.model.runner_version import parse_runner_version
from rungar.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from rungar.daemon.settings import ListenerLimits
    from rungar.github.network import Network
    from rungar.web.bounded import BoundedHttpServer, Limits

log = structlog.get_logger("rungar.daemon")


def session_owner() -> str:
    """The owner this daemon names in its message sessions: its host and process, which GitHub names
    in the conflict another daemon's session create gets (docs/operating.md, "Running a
    standby")."""
    import os

    return f"{socket.gethostname() or 'rungar'}/{os.getpid()}"


def _discard(names: set[str], name: str, _: object) -> None:
    names.discard(name)


def listener_limits(settings: ListenerLimits, **more: int) -> Limits:
    """A listener's bounds as ``rungar.yaml`` sets them."""
    from rungar.web.bounded import Limits

    return Limits(
        header_timeout=settings.header_timeout,
        body_timeout=settings.body_timeout,
        idle_timeout=settings.idle_timeout,
        max_connections=settings.max_connections,
        **more,
    )


def serve_metrics(
    metrics: Metrics,
    settings: MetricsSettings,
    ready: Callable[[], tuple[bool, str]] | None = None,
) -> BoundedHttpServer:
    """``/metrics``, ``/healthz`` and ``/readyz`` (``ready()``, from the listener's thread) on
    ``settings.listen``, bounded like every listener of the daemon."""
    from rungar.engine.report.metrics import health_routes
    from rungar.web.bounded import BoundedHttpServer, bind

    sock = bind(settings.listen, key="metrics.listen")
    server = BoundedHttpServer(
        metrics.app(health_routes(ready)),
        sock,
        listener_limits(settings, max_body_bytes=64 * 1024),
        name="metrics",
    )
    server.start()
    return server


class StoreCursors:
    """What the GitHub side keeps in the state database: each listener's last message id, each
    scale set's id and the message session it holds (deleted at the next start after a crash)."""

    def __init__(self, store: SqliteStore) -> None:
        self.store = store

    async def get_last_message_id(self, scale_set_id: int) -> int:
        return self.store.last_message_id(str(scale_set_id))

    async def set_last_message_id(self, scale_set_id: int, message_id: int) -> None:
        self.store.set_last_message_id(str(scale_set_id), message_id)

    async def get_scale_set_id(self, name: str) -> int:
        return int(self.store.get_meta(f"github.scale_set_id.{name}") or 0)

    async def set_scale_set_id(self, name: str, scale_set_id: int) -> None:
        self.store.set_meta(f"github.scale_set_id.{name}", str(scale_set_id))

    async def get_session_id(self, scale_set_id: int) -> str:
        return self.store.get_meta(f"github.session_id.{scale_set_id}") or ""

    async def set_session_id(self, scale_set_id: int, session_id: str) -> None:
        self.store.set_meta(f"github.session_id.{scale_set_id}", session_id)


class Daemon:
    """One daemon. ``kinds`` are the provider types it serves in process (none unless the
    program running it adds them); ``on_control`` is handed the daemon's control surface once
    it serves, so a program running the daemon in its own process (the demo's live view) reads
    it without going through the socket; ``settings_path`` is the settings file, named in
    problems."""

    def __init__(
        self,
        settings: DaemonSettings,
        clock: Clock | None = None,
        *,
        kinds: ProviderKinds | None = None,
        on_control: Callable[[Control | None], None] | None = None,
        settings_path: str = "",
    ) -> None:
        self.settings = settings
        # told by rungar status, so rungar doctor finds it; named in problems with its keys
        self.settings_path = settings_path
        self.clock = clock or SystemClock()
        self.kinds = kinds or ProviderKinds()
        self.on_control = on_control
        self.warnings: list[str] = []
        self.timing = Timing()
        self.started_at = self.clock.now()  # this daemon instance, as providers are told

    def network(self) -> Network:
        """How the daemon reaches GitHub (rungar.yaml's keys over the environment's), or a
        ConfigError naming the key or variable at fault."""
        from rungar.github.network import NetworkError
        from rungar.github.urls import parse_config_url

        try:
            network = github_network(self.settings.github)
            network.route(parse_config_url(self.settings.github.url).rest_base)
            network.trust.context()  # the CA file, read now: a problem stops the start
            return network
        except NetworkError as e:
            raise ConfigError([str(e)]) from None

    def _github(self, store: SqliteStore, metrics: Metrics) -> Any:
        from rungar.github.auth import AppAuth, PatAuth
        from rungar.github.service import ScaleSetGitHub
        from rungar.github.urls import parse_config_url

        gh = self.settings.github
        auth: Any
        apps = self.app_auths()
        if apps:
            auth = apps[0]
        elif gh.app_private_key_path:
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
        network = self.network()
        log.info(
            "github.network",
            url=gh.url,
            proxy=network.route(parse_config_url(gh.url).rest_base).shown(),
            trust=network.trust.shown(),
        )
        return ScaleSetGitHub(
            gh.url,
            auth,
            self.clock,
            network=network,
            cursors=StoreCursors(store),
            sessions=StoreCursors(store),
            long_poll_timeout=gh.long_poll_timeout,
            timing=gh.timing.value(),
            session_retry_first=self.timing.session_retry_first,
            session_retry_max=self.timing.session_retry_max,
            owner=session_owner(),
            more_apps=apps[1:],
        )

    def app_auths(self) -> list[Any]:
        """Each App of ``github.apps``, its key read; a key that cannot be read or used is a
        problem at its ``private_key_path`` (FILE:LINE:COL)."""
        from rungar.github.auth import AppAuth, check_auth
        from rungar.github.urls import parse_config_url

        gh = self.settings.github
        found, problems = [], []
        for i, app in enumerate(gh.apps):
            where = where_key(self.settings_path, ("github", "apps", i, "private_key_path"))
            try:
                auth = AppAuth(
                    app.client_id,
                    app.installation_id,
                    read_secret(app.private_key_path, self.warnings),
                )
                check_auth(auth, parse_config_url(gh.url))
            except OSError as e:
                problems.append(f"{where}: cannot read {app.private_key_path}: {e.strerror}")
                continue
            except ConfigError as e:
                problems.extend(f"{where}: {p}" for p in e.problems)
                continue
            found.append(auth)
        if problems:
            raise ConfigError(problems)
        return found

    def _bind_webhook(self) -> tuple[socket.socket, str] | None:
        """The optional ``workflow_job`` receiver's socket and secret, taken before anything
        starts: a missing secret or a port in use stops the daemon with its reason."""
        from rungar.web.bounded import bind

        hook = self.settings.webhook
        if not hook.listen:
            return None
        if not hook.secret_path:
            raise ConfigError(["webhook.secret_path: a secret is required to receive webhooks"])
        try:
            secret = read_secret(hook.secret_path, self.warnings)
        except OSError as e:
            raise ConfigError([f"webhook.secret_path: cannot read {hook.secret_path}: {e}"]) from e
        return bind(hook.listen, key="webhook.listen"), secret

    def _serve_webhook(
        self, bound: tuple[socket.socket, str], engine: Engine, runloop: RunLoop
    ) -> BoundedHttpServer:
        """A delivery wakes the scale sets it matches, which then try again at once instead of
        at the next message or reconcile pass. The receiver runs on its listener's thread, so
        the wake is handed to the engine's loop."""
        from rungar.github.webhook import WebhookReceiver
        from rungar.web.bounded import BoundedHttpServer, engine_caller

        sock, secret = bound
        labels = {name: list(s.config.labels) or [name] for name, s in engine.sets.items()}
        on_engine = engine_caller(asyncio.get_running_loop())
        # One woken scale per scale set at a time: a burst of deliveries (or of replays under
        # new delivery ids) adds nothing while the one it would start is still running.
        in_flight: set[str] = set()

        def wake(names: Sequence[str], job: object) -> None:
            def on_loop() -> None:
                for name in names:
                    if name not in in_flight:
                        in_flight.add(name)
                        task = engine.spawn(engine.scale(name))
                        task.add_done_callback(partial(_discard, in_flight, name))
                runloop.wake()

            on_engine(on_loop)

        def count(outcome: str) -> None:
            engine.metrics.webhook_deliveries.labels(outcome).inc()

        hook = self.settings.webhook
        receiver = WebhookReceiver(
            secret, labels, wake, max_body=hook.max_body_bytes, on_outcome=count
        )
        server = BoundedHttpServer(
            receiver,
            sock,
            listener_limits(hook, max_body_bytes=hook.max_body_bytes),
            name="webhook",
            on_refused=receiver.count,
        )
        server.start()
        return server

    def _open_state(self) -> tuple[SqliteStore, EventLog]:
        """The state database and the event log, in ``state_dir``."""
        settings = self.settings
        state_dir = Path(settings.state_dir)
        state_dir.mkdir(parents=True, exist_ok=True)
        store = SqliteStore(state_dir / "state.db", now=self.clock.now)
        events = EventLog(
            self.clock,
            Path(settings.events.file) if settings.events.file else state_dir / "events.jsonl",
            max_count=settings.events.max_count,
            max_bytes=settings.events.max_bytes,
            max_age=settings.events.max_age,
        )
        return store, events

    async def _providers(
        self,
        config: ScaleSetsFile,
        plugins: list[Any],
        installation: str,
        caller: Caller,
        providers: dict[str, Provider],
    ) -> None:
        """Every configured provider, connected, into ``providers``; plugins started (and kept
        in ``plugins`` as soon as made, so a failure later in the start still stops them). A
        plugin that does not start is a problem of its provider's entry."""
        for p in config.providers:
            providers[p.name] = make_provider(
                p, self.clock, plugins, installation, config.timing, caller, self.kinds
            )
        for name, provider in providers.items():
            if isinstance(provider, PluginProvider):
                try:
                    await provider.start()
                except ProviderError as e:
                    raise ConfigError([f"providers.{name}: its plugin did not start: {e}"]) from e

    def _compose(
        self,
        config: ScaleSetsFile,
        providers: dict[str, Provider],
        github: Any,
        store: SqliteStore,
        events: EventLog,
        metrics: Metrics,
    ) -> tuple[Engine, RunLoop]:
        """The engine and its run loop, with the lease: the first scale set is the lead, and its
        message session is the lease."""
        settings = self.settings
        timing = settings.github.timing
        engine = Engine(
            config,
            providers,
            github,
            clock=self.clock,
            store=store,
            events=events,
            metrics=metrics,
            installation=settings.installation or installation_id(settings.github.url),
            max_parallel_creates=settings.max_parallel_creates,
            github_url=settings.github.url,
            registrations=RegistrationQueue(
                self.clock,
                per_minute=timing.registrations_per_minute,
                margin=timing.registration_pace_margin,
                forget_after=timing.registration_pace_forget,
                relax_every=timing.registration_pace_relax,
                most_in_flight=timing.registrations_in_flight,
                in_flight_share=timing.registrations_in_flight_share,
                window=timing.registration_pace_window,
                apps=[app.client_id for app in settings.github.apps] or [""],
                app_retry_after=timing.app_retry_after,
            ),
        )
        engine.ctx.settings_path = self.settings_path
        runner_versions = settings.github.runner_versions
        versions = engine.ctx.fleet.versions
        versions.minimum = parse_runner_version(runner_versions.minimum)
        versions.window = runner_versions.window()
        versions.info_interval = runner_versions.info_interval
        configured = runner_versions.configured_release()
        if configured is not None:
            versions.learn_release(configured)
        restore_releases(engine.ctx)
        lead = config.scale_sets[0].name
        retry = config.timing.standby_retry
        github.session_retry_for[lead] = (retry, retry)
        lease = LeaseKeeper(engine.ctx, lead=lead, owner=github.owner)
        return engine, RunLoop.of(engine, lease, Accounting(engine.ctx))

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Start everything, serve until ``stop`` is set (or SIGINT/SIGTERM), then stop it all.

        Whatever the start made is stopped and removed again, in reverse order, when a later
        step of the start fails as when the daemon stops: plugin processes and their folders,
        the admin socket, the listeners. A problem with a setting is raised as
        ``FILE: key: problem`` (:meth:`where`)."""
        settings = self.settings
        plugins: list[Any] = []
        made: list[str] = []  # the admin socket, once this daemon serves on it
        if stop is None:  # a caller that passes its own event owns the signals
            # First of all: a signal while starting stops it as cleanly as one later. A stop
            # that outlasts stop_timeout ends the process all the same (docs/commands.md).
            stop = _stop_on_signals(plugins, made, settings.stop_timeout)
        async with contextlib.AsyncExitStack() as started:
            try:
                await self._start(started, plugins, made)
            except ConfigError as e:
                raise ConfigError([self.where(p) for p in e.problems]) from e
            started.callback(log.info, "daemon.stopping", note="every runner is left in place")
            await stop.wait()

    def where(self, problem: str) -> str:
        """``problem`` with the file its key is in: rungar.yaml's own keys (``metrics.listen:
        ...``) name the settings file (``settings_path``), a provider's or the dashboard's the scale
        sets file; a problem that names its file already is left as it is."""
        files = tuple(f for f in (self.settings.scale_sets, self.settings_path) if f)
        if files and problem.startswith(files):
            return problem  # scale_sets.yaml:3:5: ... is no key of rungar.yaml
        key = problem.split(":", 1)[0].split(".", 1)[0].strip()
        if key in DaemonSettings.model_fields and self.settings_path:
            return f"{self.settings_path}: {problem}"
        if key in ("providers", "dashboard"):
            return f"{self.settings.scale_sets}: {problem}"
        return problem

    async def _start(
        self, started: contextlib.AsyncExitStack, plugins: list[Any], made: list[str]
    ) -> None:
        """Each step, and then how to undo it on ``started``: closing it undoes them all,
        newest first."""
        settings = self.settings
        config = load_scale_sets(settings.scale_sets)
        webhook_socket = self._bind_webhook()
        if webhook_socket is not None:
            started.callback(webhook_socket[0].close)
        dashboard = None
        if config.dashboard.listen:
            from rungar.web.fleet.serve import dashboard_url, prepare_dashboard, serve_dashboard

            dashboard = prepare_dashboard(config.dashboard)
            if dashboard is not None:
                started.callback(dashboard.sock.close)
        store, events = self._open_state()
        started.callback(store.close)
        started.callback(events.close)
        metrics = Metrics()
        metrics.start_time.set(self.clock.now())
        self.timing = config.timing
        github = self._github(store, metrics)
        started.push_async_callback(_quietly, github.aclose)
        for warning in self.warnings:
            log.warning(warning)
        installation = settings.installation or installation_id(settings.github.url)
        caller = Caller(installation, socket.gethostname(), self.started_at)
        providers: dict[str, Provider] = {}
        composed: list[Engine] = []

        async def stop_providers() -> None:
            # those rungar apply connected since, once the engine holds them
            live = composed[0].providers if composed else providers
            await close_providers(plugins, live.values())

        started.push_async_callback(stop_providers)
        await self._providers(config, plugins, installation, caller, providers)
        _tell_exits(plugins, events)
        engine, runloop = self._compose(config, providers, github, store, events, metrics)
        composed.append(engine)

        async def connect(p: ProviderConfig) -> Provider:
            provider = await connect_provider(
                p, self.clock, plugins, installation, engine.config.timing, caller, self.kinds
            )
            _tell_exits(plugins, events)  # the plugin `rungar apply` added
            return provider

        control = Control.of(engine, runloop, provider_factory=connect)
        from rungar.rpc.admin_server import serve_admin

        if self.on_control is not None:
            self.on_control(control)
            started.callback(self.on_control, None)
        admin = await serve_admin(
            control, settings.socket, mode=settings.socket_mode, clock=self.clock
        )
        made.append(settings.socket)
        started.push_async_callback(admin.stop)
        reporter = ReadinessReporter(engine.ctx)
        if settings.metrics.listen:
            served = serve_metrics(metrics, settings.metrics, ready=reporter.answer)
            started.push_async_callback(asyncio.to_thread, served.stop)
        if webhook_socket:
            hook = self._serve_webhook(webhook_socket, engine, runloop)
            started.push_async_callback(asyncio.to_thread, hook.stop)
        if dashboard is not None:
            page = serve_dashboard(dashboard, config.dashboard, control, self.clock)
            started.push_async_callback(asyncio.to_thread, page.stop)
            log.info("dashboard.serving", url=dashboard_url(config.dashboard, page.address))
        started.push_async_callback(runloop.stop)
        await runloop.start()
        check_interval = settings.github.runner_versions.check_interval
        if check_interval > 0:
            # Its own task: GitHub's answer about releases never delays a registration.
            watch = asyncio.create_task(watch_latest_release(engine.ctx, check_interval))
            started.push_async_callback(_cancelled, watch)
        if self.on_control is not None:
            started.callback(self.on_control, None)  # before the loops stop, as they serve it
        started.push_async_callback(reporter.stop)
        reporter.start()
        log.info(
            "daemon.started",
            scale_sets=len(config.scale_sets),
            providers=len(config.providers),
            installation=engine.installation,
        )


async def _cancelled(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task


async def _quietly(close: Callable[[], Awaitable[object]]) -> None:
    with contextlib.suppress(Exception):
        await close()


def _tell_exits(plugins: list[Any], events: EventLog) -> None:
    """Each plugin that exits on its own says so in an event ("plugin gcp exited (code 1);
    restarting in 2 s"): the plugin stopped, not the daemon."""

    def exited(name: str, sentence: str) -> None:
        events.record("provider", name, "plugin_exited", provider=name, message=sentence)

    for plugin in plugins:
        if getattr(plugin, "on_exit", False) is None:
            plugin.on_exit = exited


def _stop_on_signals(plugins: list[Any], made: list[str], within: float) -> asyncio.Event:
    """An event SIGINT or SIGTERM sets; a second signal, or a stop still running ``within``
    seconds after the first, terminates the plugins and removes the files ``made`` at once."""
    from rungar.stopping import stop_on_signals, terminate_group

    def plugins_at_once() -> None:
        for plugin in plugins:
            terminate_group(plugin.pid)
        for path in made:
            with contextlib.suppress(OSError):  # gone already
                os.unlink(path)

    stop = asyncio.Event()
    stop_on_signals(stop, at_once=plugins_at_once, within=within)
    return stop
