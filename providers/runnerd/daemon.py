"""Wiring: config → slice limits → runtime, history, provider, sampler; then serving.

Issue 6, "runnerd serve": the provider protocol on a unix socket (plaintext there only) and,
with ``listen``, over TCP with TLS (mutual when ``tls_ca`` is set) or a bearer token over TLS;
runnerctl's HTTP/JSON API on ``api_socket``; the sampler every ``sample_interval``; auto sizing
(issue 7) every 5 minutes, each change it writes taken up live by :meth:`Daemon.reconfigure`.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from rungar.clock import Clock, SystemClock
from rungar.errors import ConfigError
from rungar.model.machine import MachineState
from runnerd import readers
from runnerd.config import RunnerdConfig, RuntimeKind, check_budget, load_config
from runnerd.history import History, JobEnd
from runnerd.provider import RunnerdProvider, RunnerState
from runnerd.runtime.base import NAME_LABEL, PROFILE_LABEL, SCALE_SET_LABEL, Runtime
from runnerd.sampler import Sampler
from runnerd.sizing.autorun import AutoSizer
from runnerd.sizing.changes import Change

log = structlog.get_logger("runnerd.daemon")


@dataclass
class Daemon:
    config: RunnerdConfig
    provider: RunnerdProvider
    sampler: Sampler
    history: History

    async def close(self) -> None:
        provider = self.provider
        now = provider.clock.now()
        if provider.runtime.kind == "process":  # its runners stop with it: close their jobs
            for state in list(provider.runners.values()):
                if state.state is not MachineState.STOPPED:
                    await provider.finish(state, "cancelled", now)
        closing = getattr(self.provider.runtime, "close", None)
        if closing is not None:
            await closing()
        self.history.close()

    def reconfigure(self, config: RunnerdConfig) -> None:
        """Run with ``config`` from now on: new admissions use its profiles."""
        self.config = config
        self.provider.reconfigure(config)


def start_auto_sizing(
    daemon: Daemon, config_path: str, config_text: str
) -> asyncio.Task[None] | None:
    """Settle what a crash left of auto sizing (always), then look every 5 minutes while
    ``[sizing] auto = true`` (seed 000, "Auto sizing"). Each change written is run with at once."""
    provider = daemon.provider
    clock = provider.clock

    def written(config: RunnerdConfig, change: Change) -> None:
        daemon.reconfigure(config)

    sizer = AutoSizer(
        Path(config_path),
        Path(daemon.config.host.history_path()),
        clock,
        running_text=config_text,
        limits=lambda: slice_limits(daemon.config),
        running=provider.running_per_profile,
        on_written=written,
        started_at=clock.now(),
    )
    sizer.start()
    if not daemon.config.sizing.auto:
        return None
    return asyncio.create_task(sizer.run_forever())


def slice_limits(config: RunnerdConfig) -> tuple[int | None, float | None]:
    """The slice's MemoryMax and CPUs: the config's when set, else read from its cgroup."""
    host = config.host
    memory_max = host.memory_max
    if memory_max is None:
        memory_max = readers.read_slice_limit(host.cgroup_root, host.slice)
    cpus = host.cpus or readers.read_slice_cpus(host.cgroup_root, host.slice)
    return memory_max, cpus


def make_runtime(config: RunnerdConfig) -> Runtime:
    host = config.host
    if host.runtime is RuntimeKind.DOCKER:
        from runnerd.runtime.docker import DockerRuntime

        return DockerRuntime(host.docker_socket, host.slice, host.cgroup_root)
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
    await adopt(provider)
    sampler = Sampler(provider, clock)
    await sampler.tick()
    return Daemon(config, provider, sampler, history)


async def adopt(provider: RunnerdProvider) -> None:
    """Count again the runners a previous runnerd left running; close the rest as lost."""
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
        provider.runners[found.name] = RunnerState(
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
        history.finish(
            int(row["id"]), JobEnd("cancelled", row["peak_memory"], None, False, False, None, now)
        )


async def serve_forever(config_path: str, clock: Clock | None = None) -> int:
    """``runnerd serve -c runnerd.toml``: serve until cancelled (SIGINT/SIGTERM)."""
    from rungar.rpc.server import serve
    from rungar.rpc.tls import ServerTls
    from runnerd.api import serve_api

    text = Path(config_path).read_text()
    config = load_config(config_path)
    # SIGINT/SIGTERM end the daemon through the cleanup below (runners stopped, jobs closed).
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)
    daemon = await open_daemon(config, clock, config_text=text)
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
    api = await serve_api(daemon.provider, host.api_socket_path())
    sampling = asyncio.create_task(daemon.sampler.run())
    sizing = start_auto_sizing(daemon, config_path, text)
    log.info("runnerd.serving", socket=host.socket_path(), listen=host.listen or None)
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
        await daemon.close()
    return 0


def check_config(config_path: str) -> list[str]:
    """Problems with the config against the slice; empty when it would run."""
    try:
        config = load_config(config_path)
        memory_max, cpus = slice_limits(config)
        check_budget(config, memory_max, cpus, Path(config_path).read_text())
    except ConfigError as e:
        return e.problems
    return []
