"""Readiness in one process: the engine's scale sets coming up, what systemd is sent over a real
datagram socket, ``/healthz`` and ``/readyz`` over HTTP, and ``rungar status --wait-ready``
against a real admin socket.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rungar.cli import status
from rungar.config.loader import parse_scale_sets
from rungar.daemon.control import Control
from rungar.daemon.daemon import serve_metrics
from rungar.daemon.lease import LeaseKeeper
from rungar.daemon.readiness import ReadinessReporter, notify, readiness
from rungar.daemon.settings import MetricsSettings
from rungar.engine.engine import Engine
from rungar.engine.report.events import EventLog
from rungar.engine.report.metrics import Metrics
from rungar.model.phase import Phase
from rungar.model.sentences import LEAD_NOTE
from rungar.rpc.admin_server import serve_admin
from rungar.scaling.lease import Heard, Lease, observe
from rungar.store.sqlite import SqliteStore
from rungar.testing.clock import FakeClock
from rungar.testing.fake_github import FakeGitHub
from rungar.testing.fake_provider import GIB, FakeProvider
from tests.e2e.daemon_world import free_port

CONFIG = """\
providers:
  - { name: host, type: fake, runner: { vcpus: 1 } }
scale_sets:
  - { name: linux, max_runners: 2, providers: [host] }
  - { name: arm, max_runners: 2, providers: [host] }
"""

pytestmark = pytest.mark.usefixtures("quiet_logs")


@pytest.fixture
def engine(short_dir: Path) -> Engine:
    clock = FakeClock()
    return Engine(
        parse_scale_sets(CONFIG, "scale_sets.yaml"),
        {"host": FakeProvider("host", vcpus=4, memory_bytes=4 * GIB, clock=clock)},
        FakeGitHub(),
        clock=clock,
        store=SqliteStore(short_dir / "state.db"),
        events=EventLog(clock, short_dir / "events.jsonl"),
        installation="gh-test",
    )


@pytest.fixture
def notify_socket(short_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(short_dir / "notify"))
    sock.setblocking(False)
    monkeypatch.setenv("NOTIFY_SOCKET", str(short_dir / "notify"))
    yield sock
    sock.close()


def sent(sock: socket.socket) -> list[str]:
    messages = []
    while True:
        try:
            messages.append(sock.recv(4096).decode())
        except BlockingIOError:
            return messages


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_a_scale_set_waiting_for_another_daemons_session_counts_as_ready(engine: Engine) -> None:
    engine.sets["linux"].phase = Phase.LISTENING
    engine.sets["arm"].phase = Phase.WAITING
    assert readiness(engine.sets, engine.lease).ready
    engine.sets["arm"].phase = Phase.UNREACHABLE
    found = readiness(engine.sets, engine.lease)
    assert not found.ready and found.waiting_for == ("arm",)
    assert found.sentence == "1 of 2 scale sets have their message session; not yet arm"


def test_a_daemon_is_not_ready_while_its_lease_is_undecided_nor_while_its_listeners_start(
    engine: Engine,
) -> None:
    keeper = LeaseKeeper(engine.ctx, lead="linux", owner="vm/1")
    engine.lease = keeper
    # The lead's session opened, the lease not yet looked at: arm waits for this daemon's role.
    engine.sets["linux"].phase = Phase.LISTENING
    engine.sets["arm"].phase, engine.sets["arm"].note = Phase.WAITING, LEAD_NOTE
    assert readiness(engine.sets, engine.lease).waiting_for == ("arm",)
    # GitHub names another holder of the lead: this daemon stands by, and is up as a standby.
    engine.sets["linux"].phase = Phase.WAITING
    assert readiness(engine.sets, engine.lease).ready
    # Holding the lease, it is ready only once arm listens too.
    engine.sets["linux"].phase = Phase.LISTENING
    now = engine.clock.now()
    keeper.apply(observe(Lease(), Heard.CONFIRMED, now, keeper.timing), Heard.CONFIRMED, now)
    assert engine.acting() and not readiness(engine.sets, engine.lease).ready
    engine.sets["arm"].phase, engine.sets["arm"].note = Phase.LISTENING, ""
    assert readiness(engine.sets, engine.lease).ready


def test_nothing_is_sent_without_a_notify_socket() -> None:
    assert notify("READY=1", environ={}) is False


def test_an_abstract_notify_socket_is_reached() -> None:
    name = f"rungar-test-{free_port()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        assert notify("READY=1", environ={"NOTIFY_SOCKET": "@" + name})
        assert sock.recv(100) == b"READY=1"


async def test_systemd_hears_each_scale_set_come_up_and_ready_once(
    engine: Engine, notify_socket: socket.socket
) -> None:
    reporter = ReadinessReporter(engine.ctx)
    reporter.start()
    engine.sets["linux"].phase = Phase.LISTENING
    await settle()
    engine.sets["arm"].phase = Phase.LISTENING
    await settle()
    engine.sets["arm"].phase = Phase.UNREACHABLE  # lost its session: not ready, no second READY
    await settle()
    await reporter.stop()
    assert sent(notify_socket) == [
        "STATUS=0 of 2 scale sets have their message session; not yet linux, arm",
        "STATUS=1 of 2 scale sets have their message session; not yet arm",
        "READY=1\nSTATUS=ready: 2 of 2 scale sets have their message session",
        "STATUS=1 of 2 scale sets have their message session; not yet arm",
        "STOPPING=1\nSTATUS=stopping; every runner is left in place",
    ]


async def test_readyz_is_503_naming_what_is_not_up_until_every_scale_set_listens(
    engine: Engine,
) -> None:
    reporter = ReadinessReporter(engine.ctx)
    reporter.start()
    port = free_port()
    server = serve_metrics(
        Metrics(), MetricsSettings(listen=f"127.0.0.1:{port}"), ready=reporter.answer
    )
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
        healthz = await http.get("/healthz")  # bound before serve_metrics returns
        assert healthz.status_code == 200 and healthz.text == "alive\n"
        engine.sets["linux"].phase = Phase.LISTENING
        await settle()
        not_yet = await http.get("/readyz")
        assert not_yet.status_code == 503
        assert not_yet.text == "1 of 2 scale sets have their message session; not yet arm\n"
        engine.sets["arm"].phase = Phase.WAITING
        await settle()
        ready = await http.get("/readyz")
        assert ready.status_code == 200 and ready.text.startswith("ready: 2 of 2")
        metrics = await http.get("/metrics")
        assert metrics.status_code == 200 and "rungar_build_info" in metrics.text
    server.stop()
    await reporter.stop()


async def test_status_wait_ready_gives_up_after_its_timeout_saying_what_is_not_up(
    engine: Engine, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    engine.sets["linux"].phase = Phase.LISTENING
    path = str(short_dir / "rungar.sock")
    server = await serve_admin(Control.of(engine), path, clock=engine.clock, poll_interval=1.0)
    parser = argparse.ArgumentParser(prog="rungar")
    status.add_parser(parser.add_subparsers(dest="command"), "status", "status")
    try:
        alone = parser.parse_args(["status", "--timeout", "1s", "--socket", path])
        assert status.run(alone) == 2, "--timeout only goes with --wait-ready"
        assert capsys.readouterr().err == "rungar: --timeout goes with --wait-ready\n"
        args = parser.parse_args(["status", "--wait-ready", "--timeout", "0.5s", "--socket", path])
        code = await asyncio.to_thread(status.run, args)
        assert code == 1
        assert capsys.readouterr().err == (
            "rungar: not ready after 0.5s: "
            "1 of 2 scale sets have their message session; not yet arm\n"
        )
        engine.sets["arm"].phase = Phase.LISTENING
        args = parser.parse_args(["status", "--wait-ready", "--json", "--socket", path])
        assert await asyncio.to_thread(status.run, args) == 0
        assert '"ready": true' in capsys.readouterr().out
    finally:
        await server.stop()


async def test_a_scale_set_added_by_apply_is_waited_for_before_the_daemon_is_ready_again(
    engine: Engine,
) -> None:
    reporter = ReadinessReporter(engine.ctx)
    reporter.start()
    for state in engine.sets.values():
        state.phase = Phase.LISTENING
    await settle()
    assert reporter.answer()[0]
    added = CONFIG + "  - { name: gpu, max_runners: 1, providers: [host] }\n"
    answer = await Control.of(engine).apply(added, "scale_sets.yaml", dry_run=False)
    assert answer["applied"], answer["problems"]
    await settle()
    assert reporter.answer() == (
        False,
        "2 of 3 scale sets have their message session; not yet gpu",
    )
    await reporter.stop()
