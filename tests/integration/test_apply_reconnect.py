"""``rungar apply`` reconnects a provider whose connection settings changed (docs/scale-sets.md, "An
apply takes effect at once"): through the real admin socket and the CLI, to providers served over
real gRPC on unix sockets.

One backend (a FakeProvider, whose machines are the provider's machines) is served at two
endpoints that count the calls each receives: moving ``address`` from one to the other is a
provider reached at a new address, its machines still there.
"""

from __future__ import annotations

import argparse
import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from rungar.cli import apply
from rungar.config.loader import parse_scale_sets
from rungar.config.model import ProviderConfig
from rungar.daemon.control import Control
from rungar.daemon.providers import connect_provider, make_provider
from rungar.engine.engine import Engine
from rungar.engine.report.events import EventLog
from rungar.model.machine import (
    Created,
    CreateRequest,
    JobHint,
    Machine,
    ProviderInfo,
    Refusal,
    Removal,
)
from rungar.model.phase import Phase
from rungar.rpc.admin_server import AdminServer, serve_admin
from rungar.rpc.client import GrpcProvider
from rungar.rpc.server import ProviderServer, serve
from rungar.store.sqlite import SqliteStore
from rungar.testing.clock import FakeClock
from rungar.testing.fake_github import FakeGitHub
from rungar.testing.fake_provider import GIB, FakeProvider

pytestmark = pytest.mark.usefixtures("quiet_logs")

CONFIG = """\
timing: {{ reconcile_interval: 30s, left_grace: 0s }}
providers:
  - name: compute1
    type: runnerd
    address: {address}
    runner: {{ vcpus: 2, memory: 4GiB }}
{extra}scale_sets:
  - name: linux
    max_runners: 4
    start_timeout: 60s
    providers: [compute1]
"""


class Endpoint:
    """One address of the backend: every call it receives is counted, then served."""

    def __init__(self, backend: FakeProvider) -> None:
        self.backend = backend
        self.calls: Counter[str] = Counter()
        self.list_entered = asyncio.Event()
        self.list_gate: asyncio.Event | None = None  # set: a List waits for it

    async def info(self) -> ProviderInfo:
        self.calls["info"] += 1
        return await self.backend.info()

    async def validate_runner(self, runner: Mapping[str, Any]) -> list[str]:
        self.calls["validate_runner"] += 1
        return await self.backend.validate_runner(runner)

    async def create(self, request: CreateRequest) -> Created | Refusal:
        self.calls["create"] += 1
        return await self.backend.create(request)

    async def delete(self, name: str, removal: Removal | None = None) -> None:
        self.calls["delete"] += 1
        await self.backend.delete(name, removal)

    async def list(self, selector: Mapping[str, str]) -> list[Machine]:
        self.calls["list"] += 1
        self.list_entered.set()
        if self.list_gate is not None:
            await self.list_gate.wait()
        return await self.backend.list(selector)

    async def update_runner(self, name: str, job: JobHint) -> None:
        self.calls["update_runner"] += 1
        await self.backend.update_runner(name, job)

    async def last_output(self, name: str, lines: int = 20) -> Sequence[str]:
        return await self.backend.last_output(name, lines)


class World:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.clock = FakeClock()
        self.backend = FakeProvider("compute1", vcpus=8, memory_bytes=16 * GIB, clock=self.clock)
        self.old = Endpoint(self.backend)
        self.new = Endpoint(self.backend)
        self.servers: list[ProviderServer] = []
        self.plugins: list[Any] = []
        self.admin: AdminServer | None = None
        self.socket = str(directory / "rungar.sock")
        self.engine: Engine | None = None

    def config(self, address: str, extra: str = "") -> str:
        return CONFIG.format(address=address, extra=extra)

    async def start(self) -> None:
        for endpoint, name in ((self.old, "old"), (self.new, "new")):
            sock = f"unix://{self.directory}/{name}.sock"
            self.servers.append(await serve(endpoint, sock, clock=self.clock))
        config = parse_scale_sets(
            self.config(self.servers[0].address), str(self.directory / "scale_sets.yaml")
        )
        providers = {p.name: make_provider(p, self.clock, self.plugins) for p in config.providers}
        self.engine = Engine(
            config,
            providers,
            FakeGitHub(),
            clock=self.clock,
            store=SqliteStore(self.directory / "state.db"),
            events=EventLog(self.clock, self.directory / "events.jsonl"),
            installation="gh-test",
        )

        def factory(p: ProviderConfig) -> Any:
            return connect_provider(p, self.clock, self.plugins)

        control = Control.of(self.engine, provider_factory=factory)
        for state in self.engine.sets.values():
            state.id = await self.engine.github.ensure_scale_set(state.config)
            state.phase = Phase.LISTENING
        self.admin = await serve_admin(control, self.socket, clock=self.clock, poll_interval=1.0)

    async def stop(self) -> None:
        if self.admin is not None:
            await self.admin.stop(None)
        if self.engine is not None:
            await self.engine.drain_tasks()
            for provider in self.engine.providers.values():
                assert isinstance(provider, GrpcProvider)
                await provider.close()
        for server in self.servers:
            await server.stop(None)

    @property
    def running(self) -> Engine:
        assert self.engine is not None
        return self.engine

    async def apply(self, text: str, *flags: str) -> int:
        """``rungar apply FILE [FLAGS] --socket S`` in a thread, as the CLI process runs it."""
        path = self.directory / "scale_sets.yaml"
        path.write_text(text)
        parser = argparse.ArgumentParser(prog="rungar")
        apply.add_parser(parser.add_subparsers(dest="command"), "apply", "apply")
        args = parser.parse_args(["apply", str(path), *flags, "--socket", self.socket])
        done = asyncio.ensure_future(asyncio.to_thread(apply.run, args))
        while not done.done():
            await asyncio.wait({done}, timeout=0.02)
            await self.clock.run_for(1.0)
        code: int = done.result()
        return code


@pytest.fixture
async def world(short_dir: Path) -> AsyncIterator[World]:
    w = World(short_dir)
    await w.start()
    yield w
    await w.stop()


async def test_apply_moves_a_changed_address_to_the_new_endpoint_and_keeps_its_runner(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = world.running
    engine.on_demand("linux", 1)
    await engine.drain_tasks()
    (runner,) = engine.runners
    assert world.old.calls["create"] == 1
    before = engine.providers["compute1"]

    assert await world.apply(world.config(world.servers[1].address)) == 0
    out = capsys.readouterr().out.splitlines()
    assert "~ provider compute1: reconnecting (address changed)" in out
    assert out[-1] == "applied"
    assert engine.providers["compute1"] is not before
    (event,) = [e for e in engine.events.recent(provider="compute1") if e.action == "reconnected"]
    assert event.attributes["changed"] == ["address"]

    await engine.drain_tasks()  # the old connection closes: nothing was in flight on it
    assert isinstance(before, GrpcProvider) and before.in_flight == 0
    old_calls = dict(world.old.calls)
    await engine.reconcile()
    engine.on_demand("linux", 1)
    await engine.drain_tasks()
    assert world.new.calls["list"] >= 1  # the provider's calls reach the new endpoint
    assert dict(world.old.calls) == old_calls  # and no longer the old one
    assert [r.name for r in engine.runners] == [runner.name]  # still counted, not duplicated
    assert world.new.calls["create"] == 0
    assert len(world.backend.machines) == 1


async def test_apply_dry_run_says_a_provider_would_reconnect_and_changes_nothing(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    before = world.running.providers["compute1"]
    assert await world.apply(world.config(world.servers[1].address), "--dry-run") == 0
    out = capsys.readouterr().out.splitlines()
    assert "~ provider compute1: reconnecting (address changed)" in out
    assert out[-1] == "not applied (--dry-run)"
    assert world.running.providers["compute1"] is before
    assert world.new.calls.total() == 0


async def test_apply_refuses_unreadable_token_and_tls_files_and_keeps_the_old_connection(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    (world.directory / "not-pem.crt").write_text("hello")
    extra = "    tls: { ca_file: not-pem.crt }\n    token_file: missing-token\n"
    # Nothing listens there: the files are refused before any connection is tried.
    text = world.config("127.0.0.1:9").replace(
        "    runner: { vcpus: 2, memory: 4GiB }\n",
        "    runner: { vcpus: 2, memory: 4GiB }\n" + extra,
    )
    before = world.running.providers["compute1"]
    assert await world.apply(text) == 2
    err = capsys.readouterr().err
    path, folder = world.directory / "scale_sets.yaml", world.directory
    # Named as every config problem is, file:line:col of the key (lines 7 and 8 of the file).
    assert f"{path}:8:5: providers.compute1.token_file: cannot read {folder}/missing-token" in err
    assert f"{path}:7:12: providers.compute1.tls.ca_file: {folder}/not-pem.crt is not a PEM" in err
    assert world.running.providers["compute1"] is before
    assert world.running.config.providers[0].address == world.servers[0].address
    await world.running.reconcile()
    assert world.old.calls["list"] >= 1 and world.new.calls.total() == 0


async def test_a_replaced_connection_closes_only_after_its_call_in_flight_is_answered(
    world: World,
) -> None:
    engine = world.running
    old = engine.providers["compute1"]
    assert isinstance(old, GrpcProvider)
    world.old.list_gate = asyncio.Event()
    listing = asyncio.ensure_future(old.list({}))
    await world.old.list_entered.wait()

    assert await world.apply(world.config(world.servers[1].address)) == 0
    assert old.in_flight == 1  # still waiting for its answer; the old connection stays open
    world.old.list_gate.set()
    assert await listing == []  # answered, not cut short (a plain close() cancels it)
    await engine.drain_tasks()
    assert old.in_flight == 0
