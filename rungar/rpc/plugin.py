"""Local provider plugins: executables Rungar starts itself (docs/architecture.md).

A provider entry with ``command: [...]`` is a plugin. Rungar makes a private directory (mode
0700), starts the command with ``RUNGAR_PLUGIN_SOCKET=<dir>/provider.sock`` in its environment,
and waits for one line on its stdout::

    RUNGAR_PLUGIN 1 unix://<dir>/provider.sock

Every other line the plugin writes, on stdout or stderr (its logs, a traceback), is logged by
Rungar as ``plugin.output`` with the provider's name.

(``1`` is the handshake version). It then talks the provider protocol over that socket in
plaintext: the directory's mode is the access control. On shutdown it sends SIGTERM, then
SIGKILL after a grace period. A plugin that dies is restarted with doubling backoff (reset once
it has run for a while); the socket path stays the same, so the ``GrpcProvider`` pointing at it
simply reconnects.

Given ``settings`` (the daemon hands over a provider's keys from scale_sets.yaml, its name and
the installation), Rungar writes them once as JSON to ``<dir>/settings.json`` (mode 0600) and
names that file in ``RUNGAR_PLUGIN_SETTINGS``: the user writes a provider's keys in one place,
and restarts read the same file.

The plugin side is :func:`serve_plugin`: ``asyncio.run(serve_plugin(MyProvider()))`` serves a
Provider on the socket, prints the handshake, and stops cleanly on SIGTERM or SIGINT.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import structlog

from rungar.clock import Clock, SystemClock
from rungar.errors import ConfigError, ProviderError
from rungar.model.provider import Provider
from rungar.stopping import stop_on_signals

SOCKET_ENV = "RUNGAR_PLUGIN_SOCKET"
SETTINGS_ENV = "RUNGAR_PLUGIN_SETTINGS"
SETTINGS_FILE = "settings.json"
HANDSHAKE = "RUNGAR_PLUGIN"
HANDSHAKE_VERSION = "1"

log = structlog.get_logger("rungar.rpc.plugin")


class PluginError(ProviderError):
    """A plugin could not be started or did not complete its handshake."""


def handshake_line(address: str) -> str:
    return f"{HANDSHAKE} {HANDSHAKE_VERSION} {address}"


def parse_handshake(line: str) -> str | None:
    """The address a handshake line announces; None for any other output line."""
    parts = line.strip().split()
    if len(parts) != 3 or parts[0] != HANDSHAKE:
        return None
    if parts[1] != HANDSHAKE_VERSION:
        raise PluginError(f"plugin speaks handshake version {parts[1]}, Rungar {HANDSHAKE_VERSION}")
    return parts[2]


def next_backoff(
    current: float, first: float, maximum: float, ran_for: float, stable: float
) -> float:
    """The wait before the next restart: reset after a stable run, else doubled up to max."""
    if ran_for >= stable or current <= 0:
        return first
    return min(maximum, current * 2)


def exited_sentence(name: str, code: int, restart_in: float) -> str:
    """ "plugin gcp exited (code 1); restarting in 2 s": the plugin, not the daemon, stopped."""
    how = f"code {code}" if code >= 0 else f"killed by signal {-code}"
    return f"plugin {name} exited ({how}); restarting in {restart_in:g} s"


class PluginProcess:
    """One local plugin: started, watched, restarted and stopped by Rungar."""

    # Plugins started in this process and not yet stopped: what a command ending at once (a
    # second Ctrl-C) must still see stopped and removed (rungar.demo.sweep).
    running: ClassVar[set[PluginProcess]] = set()

    def __init__(
        self,
        command: Sequence[str],
        *,
        name: str = "plugin",
        clock: Clock | None = None,
        env: Mapping[str, str] | None = None,
        settings: Mapping[str, Any] | None = None,
        ready_timeout: float = 30.0,
        stop_grace: float = 10.0,
        backoff_first: float = 1.0,
        backoff_max: float = 60.0,
        stable_after: float = 60.0,
    ) -> None:
        if not command:
            raise ConfigError([f"provider {name}: command is empty"])
        self.command = tuple(command)
        self.name = name
        self.restarts = 0
        self._clock: Clock = clock or SystemClock()
        self._env = dict(env) if env is not None else None
        # Handed to the plugin in a file, never logged: a provider's keys are its own business.
        self.settings = dict(settings) if settings is not None else None
        self._ready_timeout = ready_timeout
        self._stop_grace = stop_grace
        self._backoff_first = backoff_first
        self._backoff_max = backoff_max
        self._stable_after = stable_after
        self._dir = ""
        self._process: asyncio.subprocess.Process | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._drain: asyncio.Task[None] | None = None
        self._stopping = False
        # Told each time the plugin exits on its own: its name and the sentence saying so.
        self.on_exit: Callable[[str, str], None] | None = None

    @property
    def address(self) -> str:
        if not self._dir:
            raise PluginError(f"plugin {self.name} is not started")
        return f"unix://{self._dir}/provider.sock"

    @property
    def settings_path(self) -> str:
        """The file the settings are handed over in; empty when there are none."""
        if self.settings is None:
            return ""
        if not self._dir:
            raise PluginError(f"plugin {self.name} is not started")
        return os.path.join(self._dir, SETTINGS_FILE)

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    async def start(self) -> str:
        """Start the plugin and wait for its handshake; the address to connect to."""
        self._dir = tempfile.mkdtemp(prefix=f"rungar-{self.name}-")  # mode 0700
        os.chmod(self._dir, 0o700)
        PluginProcess.running.add(self)
        try:
            self._write_settings()
            await self._launch()
        except BaseException:
            shutil.rmtree(self._dir, ignore_errors=True)
            PluginProcess.running.discard(self)
            raise
        self._supervisor = asyncio.create_task(self._supervise(), name=f"plugin-{self.name}")
        return self.address

    def _write_settings(self) -> None:
        # Written once: every restart of the plugin reads the same file.
        if self.settings is None:
            return
        try:
            text = json.dumps(self.settings)
        except (TypeError, ValueError) as e:
            raise PluginError(f"plugin {self.name}: its settings are not JSON: {e}") from e
        fd = os.open(self.settings_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            os.fchmod(f.fileno(), 0o600)  # whatever the umask
            f.write(text)

    async def _launch(self) -> None:
        env = dict(os.environ if self._env is None else self._env)
        env[SOCKET_ENV] = self.address[len("unix://") :]
        env.pop(SETTINGS_ENV, None)  # never a stale file named by Rungar's own environment
        if self.settings is not None:
            env[SETTINGS_ENV] = self.settings_path
        try:
            process = await asyncio.create_subprocess_exec(
                *self.command,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                # Its own logs join Rungar's, each line a plugin.output naming the provider,
                # rather than landing on the terminal of whoever started Rungar.
                stderr=asyncio.subprocess.STDOUT,
                env=env,
                start_new_session=True,  # a Ctrl-C at Rungar's terminal is Rungar's to relay
            )
        except OSError as e:
            raise PluginError(f"plugin {self.name}: cannot start {self.command[0]}: {e}") from e
        self._process = process
        try:
            async with asyncio.timeout(self._ready_timeout):
                announced = await self._read_handshake(process)
        except TimeoutError as e:
            await self._terminate(process)
            raise PluginError(
                f"plugin {self.name} printed no handshake within {self._ready_timeout:g}s"
            ) from e
        except PluginError:
            await self._terminate(process)
            raise
        if announced != self.address:
            await self._terminate(process)
            raise PluginError(
                f"plugin {self.name} announced {announced}, but was given {self.address}"
            )
        self._drain = asyncio.create_task(self._log_output(process))
        log.info("plugin.started", provider=self.name, pid=process.pid)

    async def _read_handshake(self, process: asyncio.subprocess.Process) -> str:
        assert process.stdout is not None
        while True:
            raw = await process.stdout.readline()
            if not raw:
                code = await process.wait()
                raise PluginError(
                    f"plugin {self.name} exited with code {code} before its handshake"
                )
            line = raw.decode(errors="replace")
            address = parse_handshake(line)
            if address is not None:
                return address
            self._log_line(line)

    async def _log_output(self, process: asyncio.subprocess.Process) -> None:
        # Keep reading so a chatty plugin never blocks on a full pipe.
        assert process.stdout is not None
        while line := await process.stdout.readline():
            self._log_line(line.decode(errors="replace"))

    def _log_line(self, line: str) -> None:
        log.info("plugin.output", provider=self.name, line=line.rstrip("\n")[:500])

    async def _supervise(self) -> None:
        backoff = 0.0
        while not self._stopping:
            process = self._process
            assert process is not None
            started = self._clock.now()
            code = await process.wait()
            if self._stopping:
                return
            backoff = next_backoff(
                backoff,
                self._backoff_first,
                self._backoff_max,
                self._clock.now() - started,
                self._stable_after,
            )
            sentence = exited_sentence(self.name, code, backoff)
            log.warning(
                "plugin.exited",
                sentence=sentence,
                provider=self.name,
                code=code,
                restart_in=backoff,
            )
            if self.on_exit is not None:
                self.on_exit(self.name, sentence)
            while not self._stopping:
                await self._clock.sleep(backoff)
                if self._stopping:
                    return
                try:
                    await self._launch()
                    self.restarts += 1
                    break
                except PluginError as e:
                    log.warning("plugin.restart_failed", provider=self.name, error=str(e))
                    backoff = min(self._backoff_max, backoff * 2)

    async def _terminate(self, process: asyncio.subprocess.Process) -> None:
        if process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(self._stop_grace):
                await process.wait()
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()

    async def stop(self) -> None:
        """SIGTERM, then SIGKILL after ``stop_grace``; no restart after this. Stopping a
        stopped plugin does nothing."""
        if self._stopping:
            return
        self._stopping = True
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
        if self._process is not None:
            await self._terminate(self._process)
            log.info("plugin.stopped", provider=self.name, code=self._process.returncode)
        if self._drain is not None:
            self._drain.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._drain
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)
        PluginProcess.running.discard(self)

    @property
    def folder(self) -> str:
        """The plugin's private folder (its socket, its settings); empty before it starts."""
        return self._dir


async def serve_plugin(provider: Provider, *, grace: float = 5.0) -> None:
    """The plugin side: serve ``provider`` on the socket Rungar named, until SIGTERM/SIGINT."""
    from rungar.rpc.server import serve  # the server kit pulls in grpc's server half

    path = os.environ.get(SOCKET_ENV)
    if not path:
        raise ConfigError([f"{SOCKET_ENV} is not set: this program is started by rungar"])
    server = await serve(provider, f"unix://{path}")
    os.chmod(path, 0o600)
    stop = asyncio.Event()
    stop_on_signals(stop)
    sys.stdout.write(handshake_line(server.address) + "\n")
    sys.stdout.flush()
    try:
        await stop.wait()
    finally:
        await server.stop(grace)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
