"""Wiring: config → slice limits → runtime, history, provider, sampler; then serving.

``runnerd serve``: the provider protocol on a unix socket (plaintext there only) and,
with ``listen``, over TCP with TLS (mutual when ``tls_ca`` is set) or a bearer token over TLS;
runnerctl's HTTP/JSON API on ``api_socket``; the sampler every ``sample_interval``; auto sizing
at start and every 5 minutes, each change it writes taken up live by :meth:`Daemon.reconfigure`
and sent as a ``sizing.changed`` event; SIGHUP reloads the config; the metrics listener.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from pathlib import Path
from typing import Any

import structlog

from rungar.clock import Clock, SystemClock
from rungar.errors import ConfigError
from rungar.model.machine import MachineState
from rungar.stopping import stop_on_signals
from runnerd import readers
from runnerd.config import RunnerdConfig, RuntimeKind, check_budget, load_config
from runnerd.events import EventLog
from runnerd.history import History, JobEnd
from runnerd.outcome import Ending, recorded_result
from runnerd.provider import HostedRunner, RunnerdProvider, slice_limits
from runnerd.running import Daemon, reload, start_auto_sizing
from runnerd.runtime.base import NAME_LABEL, PROFILE_LABEL, SCALE_SET_LABEL, Runtime
from runnerd.sampler import Sampler

log = structlog.get_logger("runnerd.daemon")


def make_runtime(config: RunnerdConfig) -> Runtime:
    host = config.host
    if host.runtime is RuntimeKind.DOCKER:
        from runnerd.runtime.docker import DockerRuntime

        isolation = host.isolation.value if host.isolation is not None else None
        return DockerRuntime(host.docker_socket, host.slice, host.cgroup_root, isolation=isolation)
    from runnerd.runtime.process import ProcessRuntime

    return ProcessRuntime(host.slice, host.state_dir, host.cgroup_root, proc_root=host.proc_root)


async def open_daemon(
    config: RunnerdConfig,
    clock: Clock | None = None,
    runtime: Runtime | None = None,
    config_text: str = "",
) -> Daemon:
    """Check the config against the slice, open the history, adopt what a previous run left."""
    memory_max, cpus = slice_limits(config)
    check_budget(config, memory_max, cpus, config_text)
    clock = clock or SystemClock()
    Path(config.host.state_dir).mkdir(mode=0o700, parents=True, exist_ok=True)
    history = History(config.host.history_path())
    meminfo = readers.read_meminfo(config.host.proc_root)
    provider = RunnerdProvider(
        config,
        runtime or make_runtime(config),
        history,
        clock,
        memory_max,
        cpus,
        host_memory=meminfo.total if meminfo else None,
    )
    provider.events = EventLog(config.host.history_path())
    await adopt(provider)
    sampler = Sampler(provider, clock)
    await sampler.tick()
    return Daemon(config, provider, sampler, history)


async def adopt(provider: RunnerdProvider) -> None:
    """Count again the runners a previous runnerd left running; close the rest as lost: a job
    that ran is recorded by what runnerd saw of it (Rungar can no longer say), one that never
    got a job leaves no row."""
    history = provider.history
    now = provider.clock.now()
    open_rows = {row["runner"]: row for row in history.open_jobs()}
    for found in await provider.runtime.adopt():
        profile = provider.config.profiles.get(found.labels.get(PROFILE_LABEL, ""))
        row = open_rows.pop(found.name, None)
        if profile is None or row is None:
            log.warning("runner.unadoptable", runner=found.name)
            continue
        # Adopted runners count at their caps until a sample shows what they use.
        provider.runners[found.name] = HostedRunner(
            name=found.name,
            request_id="",
            scale_set=found.labels.get(SCALE_SET_LABEL, row["scale_set"]),
            profile=profile,
            labels={k: v for k, v in found.labels.items() if not k.startswith("runnerd.")},
            handle=found.handle,
            created_at=found.started_at,
            reserved=profile.memory,
            reserved_cpu=profile.cpus,
            basis="its cap, as a previous runnerd started it",
            row=int(row["id"]),
            state=MachineState.RUNNING,
            used_at=now,
        )
        log.info("runner.adopted", runner=found.labels.get(NAME_LABEL, found.name))
    for row in open_rows.values():
        ending = Ending(
            took_job=row["repository"] is not None,
            exited=row["finished_at"] is not None,
            exit_code=row["exit_code"],
            met_cap=bool(row["met_cap"]),
        )
        result = recorded_result(None, ending)
        if result is None:
            history.drop(int(row["id"]))
            continue
        end = JobEnd(
            result,
            row["peak_memory"],
            row["avg_cpu"],
            bool(row["met_cap"]),
            bool(row["killed_for_memory"]),
            row["sock_throttled"],
            row["finished_at"] or now,
            row["exit_code"],
            row["peak_cpu"],
        )
        history.finish(int(row["id"]), end)


async def serve_forever(config_path: str, clock: Clock | None = None) -> int:
    """``runnerd serve -c runnerd.toml``: serve until cancelled (SIGINT/SIGTERM)."""
    from rungar.rpc.server import serve
    from rungar.rpc.tls import ServerTls
    from runnerd.api import serve_api
    from runnerd.dashboard.server import bind_dashboard, serve_dashboard
    from runnerd.metrics_http import serve_metrics

    text = Path(config_path).read_text()
    config = load_config(config_path)
    dashboard_socket = bind_dashboard(config.host) if config.host.dashboard_listen else None
    # SIGINT/SIGTERM end the daemon through the cleanup below (runners stopped, jobs closed).
    stopping = asyncio.Event()
    stop_on_signals(stopping)  # a second one: exit 130 at once, the runners left to adoption
    daemon = await open_daemon(config, clock, config_text=text)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGHUP, reload, daemon, config_path)
    host = config.host
    servers = [await serve(daemon.provider, f"unix://{Path(host.socket_path()).resolve()}")]
    if host.listen:
        token = Path(host.token_file).read_text().strip() if host.token_file else ""
        tls = ServerTls(host.tls_cert, host.tls_key, host.tls_ca)
        servers.append(
            await serve(
                daemon.provider,
                host.listen,
                tls=tls,
                token=token,
                insecure_no_client_auth=host.insecure_no_client_auth,
            )
        )
    # POST /reload (runnerctl tui's apply) runs the same reload as SIGHUP and the dashboard's save.
    api = await serve_api(
        daemon.provider, host.api_socket_path(), reload=lambda: reload(daemon, config_path)
    )
    metrics = await serve_metrics(daemon.provider.metrics, host) if host.metrics_listen else None
    dashboard = (
        await serve_dashboard(daemon, config_path, dashboard_socket)
        if dashboard_socket is not None
        else None
    )
    sampling = asyncio.create_task(daemon.sampler.run())
    sizing = start_auto_sizing(daemon, config_path, text)
    log.info(
        "runnerd.serving",
        socket=host.socket_path(),
        listen=host.listen or None,
        dashboard=dashboard.url if dashboard else None,
    )
    stop_wait = asyncio.ensure_future(stopping.wait())
    waits: list[asyncio.Future[Any]] = [asyncio.ensure_future(s.wait()) for s in servers]
    try:
        await asyncio.wait([*waits, stop_wait, api.task], return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (sampling, sizing):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        for server in servers:  # before their waiters are touched: grpc shares the future
            await server.stop()
        stop_wait.cancel()
        await asyncio.gather(*waits, stop_wait, return_exceptions=True)
        await api.stop()
        if metrics is not None:
            await metrics.stop()
        if dashboard is not None:
            await dashboard.stop()
        loop.remove_signal_handler(signal.SIGHUP)
        await daemon.close()
    return 0


def check_config(config_path: str, memory_max: int | None = None) -> tuple[list[str], list[str]]:
    """(problems, warnings) of the config against the slice; no problems when it would run.

    It needs no running Docker Engine: with the docker runtime it asks the Engine only to warn
    when none answers, or when it lacks the runtime ``isolation`` names."""
    try:
        config = load_config(config_path)
        read_max, cpus = slice_limits(config)
        check_budget(config, memory_max or read_max, cpus, Path(config_path).read_text())
    except ConfigError as e:
        return e.problems, []
    warnings = []
    if not config.profiles:
        warnings.append(f"{config_path}: no [profiles.NAME]: runnerd refuses every runner")
    if config.host.runtime is RuntimeKind.DOCKER:
        warnings += docker_warnings(config)
    return [], warnings


def docker_warnings(config: RunnerdConfig, timeout: float = 2.0) -> list[str]:
    """What the Docker Engine at ``docker_socket`` lacks for this config, asked read-only."""
    import httpx

    from runnerd.runtime.docker import ISOLATIONS

    host = config.host
    transport = httpx.HTTPTransport(uds=host.docker_socket)
    try:
        with httpx.Client(transport=transport, base_url="http://docker", timeout=timeout) as c:
            c.get("/_ping").raise_for_status()
            info = c.get("/info").json() if host.isolation is not None else {}
    except (httpx.HTTPError, ValueError) as e:
        return [
            f"no Docker Engine answers at {host.docker_socket} ({type(e).__name__}); "
            "runnerd serve needs one for the docker runtime"
        ]
    if host.isolation is None:
        return []
    runtime = ISOLATIONS[host.isolation.value][0]
    runtimes = info.get("Runtimes") or {}
    if runtime not in runtimes:
        return [
            f"the Docker Engine at {host.docker_socket} has no {runtime} runtime, which "
            f'isolation = "{host.isolation}" runs runners under; it has {", ".join(runtimes)}'
        ]
    return []
