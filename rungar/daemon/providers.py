"""The daemon's providers: made from their configuration (in process, at a gRPC address, or a
local plugin it starts), and stopped again.

A plugin (``command:``, or the shipped plugin of gcp and aws) is a process the daemon starts,
with its settings in a private folder (:class:`rungar.rpc.plugin.PluginProcess`); every one
started is kept in the caller's list, so whatever ends the daemon (its stop, or a start that
fails part way) stops it and removes its folder (:func:`close_providers`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rungar.clock import Clock
from rungar.config.loader import FAKE_TYPE
from rungar.config.model import ProviderConfig, Timing
from rungar.daemon.deadlines import CallTimeouts, call_timeouts
from rungar.daemon.provider_kinds import ProviderKinds
from rungar.daemon.shipped_plugins import is_shipped, shipped_command
from rungar.errors import ConfigError
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
from rungar.model.provider import Provider

if TYPE_CHECKING:
    from rungar.rpc.client import GrpcProvider
    from rungar.rpc.plugin import PluginProcess
    from rungar.rpc.reconnects import Reconnects


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
    config: ProviderConfig,
    clock: Clock,
    plugins: list[Any],
    installation: str = "",
    timing: Timing | None = None,
    caller: Caller | None = None,
    kinds: ProviderKinds | None = None,
) -> Provider:
    """A provider of any type: one ``kinds`` serves in process, a gRPC address, or a local
    plugin to start (handed :func:`plugin_settings`): its ``command:``, or for gcp and aws with
    neither address nor command, the shipped plugin (:mod:`rungar.daemon.shipped_plugins`). Its
    calls' deadlines are those the configuration names (:func:`call_timeouts`); every gRPC call
    names ``caller``."""
    options = config.options
    in_process = (kinds or ProviderKinds()).build(config, clock)
    if in_process is not None:
        return in_process
    if config.type == FAKE_TYPE and not config.address and not config.command:
        raise ConfigError(
            [f"providers.{config.name}: type fake runs in process; this program does not serve it"]
        )
    from rungar.rpc.tls import ClientTls

    tls_options = options.get("tls") or {}
    tls = ClientTls(**tls_options) if tls_options else None
    token = Path(options["token_file"]).read_text().strip() if options.get("token_file") else ""
    timeouts = call_timeouts(config, timing or Timing())
    command = config.command
    if not command and not config.address and is_shipped(config.type):
        command = shipped_command(config.type)
    if command:
        from rungar.rpc.plugin import PluginProcess

        plugin = PluginProcess(
            list(command),
            name=config.name,
            clock=clock,
            settings=plugin_settings(config, installation),
        )
        plugins.append(plugin)
        return PluginProvider(config.name, plugin, timeouts, caller)
    return timeouts.client(config.name, config.address, tls=tls, token=token, caller=caller)


async def connect_provider(
    config: ProviderConfig,
    clock: Clock,
    plugins: list[Any],
    installation: str = "",
    timing: Timing | None = None,
    caller: Caller | None = None,
    kinds: ProviderKinds | None = None,
) -> Provider:
    """:func:`make_provider`, its plugin started: for a provider added by ``rungar apply``."""
    provider = make_provider(config, clock, plugins, installation, timing, caller, kinds)
    if isinstance(provider, PluginProvider):
        await provider.start()
    return provider


class PluginProvider:
    """A provider served by a plugin process the daemon starts (``command:``): every call goes
    to the plugin's gRPC client. The plugin keeps its address across restarts, so one client
    lasts the daemon's life."""

    def __init__(
        self, name: str, plugin: PluginProcess, timeouts: CallTimeouts, caller: Caller | None = None
    ) -> None:
        self.name = name
        self.plugin = plugin
        self.timeouts = timeouts
        self.caller = caller
        self._client: GrpcProvider | None = None

    async def start(self) -> None:
        address = await self.plugin.start()
        self._client = self.timeouts.client(self.name, address, caller=self.caller)

    def set_timeouts(self, timeouts: CallTimeouts) -> None:
        self.timeouts = timeouts
        if self._client is not None:
            timeouts.apply(self._client)

    @property
    def reconnects(self) -> Reconnects | None:
        """Its client's reconnects after broken connections (rungar.rpc.reconnects)."""
        return self._client.reconnects if self._client is not None else None

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

    async def delete(self, name: str, removal: Removal | None = None) -> None:
        await self.client.delete(name, removal)

    async def list(self, selector: Mapping[str, str]) -> list[Machine]:
        return await self.client.list(selector)

    async def update_runner(self, name: str, job: JobHint) -> None:
        await self.client.update_runner(name, job)

    async def last_output(self, name: str, lines: int = 20) -> Sequence[str]:
        return await self.client.last_output(name, lines)

    async def queue_changed(self, name: str, queued: tuple[JobHint, ...]) -> None:
        await self.client.queue_changed(name, queued)

    async def close(self) -> None:
        """Close the client and stop the plugin (the daemon stops it again at exit: harmless)."""
        if self._client is not None:
            await self._client.close()
        await self.plugin.stop()

    async def close_when_idle(self) -> None:
        """:meth:`close` once no call is in flight on the plugin (``rungar apply`` replaced it)."""
        if self._client is not None:
            await self._client.close_when_idle()
        await self.close()


async def close_providers(plugins: list[Any], providers: Iterable[Provider]) -> None:
    """Stop the plugins, then close every provider connection as apply left them.

    The connections are closed even when the stop is cancelled while a plugin stops (a caller
    that gave the daemon only so long to stop): a gRPC channel left open would be torn down
    whenever it is collected, on no event loop, instead of now."""
    try:
        for plugin in plugins:
            with contextlib.suppress(Exception):
                await plugin.stop()
    finally:
        for provider in providers:
            close = getattr(provider, "close", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    await close()
