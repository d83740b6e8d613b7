"""The admin server's socket handling and its event stream, through the real client.

The socket file is the access control, so where and how it is made matters; the events
stream must hand over from history to live events with no gap and no repeat, and cut off a
follower that falls behind instead of holding events for it without end.
"""

from __future__ import annotations

import asyncio
import socket
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from rungar.config.loader import parse_scale_sets
from rungar.daemon.control import Control
from rungar.engine.engine import Engine
from rungar.engine.report.events import EventLog
from rungar.errors import ConfigError
from rungar.rpc.admin_client import AdminClient, AdminError
from rungar.rpc.admin_server import AdminServer, serve_admin
from rungar.store.sqlite import SqliteStore
from rungar.testing.clock import FakeClock
from rungar.testing.fake_github import FakeGitHub
from rungar.testing.fake_provider import GIB, FakeProvider
from tests.waiting import WAIT

CONFIG = """\
providers: [{ name: compute1, type: fake, runner: { vcpus: 2, memory: 4GiB } }]
scale_sets:
  - { name: linux, max_runners: 4, providers: [compute1] }
  - { name: macos, max_runners: 2, providers: [compute1] }
"""

pytestmark = pytest.mark.usefixtures("quiet_logs")


def make_control(directory: Path) -> Control:
    clock = FakeClock()
    engine = Engine(
        parse_scale_sets(CONFIG, "scale_sets.yaml"),
        {"compute1": FakeProvider("compute1", vcpus=4, memory_bytes=8 * GIB, clock=clock)},
        FakeGitHub(),
        clock=clock,
        store=SqliteStore(directory / "state.db"),
        events=EventLog(clock),
    )
    return Control.of(engine)


@pytest.fixture
async def served(short_dir: Path) -> AsyncIterator[tuple[Control, AdminServer]]:
    control = make_control(short_dir)
    server = await serve_admin(control, str(short_dir / "run" / "rungar.sock"))
    yield control, server
    await server.stop(None)


async def test_the_parent_directory_is_made_and_the_socket_is_0660(
    served: tuple[Control, AdminServer],
) -> None:
    _, server = served
    assert stat.S_IMODE(Path(server.path).stat().st_mode) == 0o660
    async with AdminClient(server.path) as client:
        assert (await client.status())["scale_sets"][0]["name"] == "linux"


async def test_a_stale_socket_file_is_replaced(short_dir: Path) -> None:
    path = str(short_dir / "rungar.sock")
    left = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    left.bind(path)
    left.close()
    server = await serve_admin(make_control(short_dir), path, mode=0o600)
    try:
        assert stat.S_IMODE(Path(path).stat().st_mode) == 0o600
        async with AdminClient(path) as client:
            assert (await client.status())["daemon"]["installation"] == "gh-local"
    finally:
        await server.stop(None)
    assert not Path(path).exists(), "a stopped server leaves no socket file behind"


async def test_a_socket_another_daemon_listens_on_is_not_taken_over(
    served: tuple[Control, AdminServer], short_dir: Path
) -> None:
    _, server = served
    with pytest.raises(ConfigError, match=r"^socket: .* is in use: another rungar daemon listens"):
        await serve_admin(make_control(short_dir), server.path)
    async with AdminClient(server.path) as client:
        await client.status()  # the first daemon still answers


async def test_a_file_that_is_not_a_socket_is_left_alone(short_dir: Path) -> None:
    path = short_dir / "rungar.sock"
    path.write_text("keep me")
    with pytest.raises(ConfigError, match="exists and is not a socket"):
        await serve_admin(make_control(short_dir), str(path))
    assert path.read_text() == "keep me"


async def test_a_socket_path_over_103_characters_is_refused(short_dir: Path) -> None:
    path = "/tmp/" + "d" * 100 + "/rungar.sock"
    with pytest.raises(ConfigError, match="may have at most 103"):
        await serve_admin(make_control(short_dir), path)


async def test_errors_arrive_as_codes(served: tuple[Control, AdminServer]) -> None:
    _, server = served
    async with AdminClient(server.path) as client:
        with pytest.raises(AdminError) as found:
            await client.inspect_scale_set("nope")
        assert found.value.code == "not_found"
        assert str(found.value) == "no scale set named nope (known: linux, macos)"
        with pytest.raises(AdminError) as found:
            await client.remove_runners([])
        assert found.value.code == "invalid_argument"


async def test_events_follow_hands_over_from_history_with_no_gap_and_no_repeat(
    served: tuple[Control, AdminServer],
) -> None:
    control, server = served
    log = control.ctx.events
    for i in range(3):
        log.record("scale_set", "linux", f"before-{i}", scale_set="linux")

    async def keep_recording() -> None:
        # Events keep arriving while the follower connects and reads the history.
        for i in range(200):
            log.record("scale_set", "linux", f"during-{i}", scale_set="linux")
            await asyncio.sleep(0)

    recording = asyncio.ensure_future(keep_recording())
    seen: list[str] = []
    async with AdminClient(server.path) as client:
        async for event in client.events(follow=True):
            seen.append(event["action"])
            if event["action"] == "during-199":
                break
    await recording
    expected = [f"before-{i}" for i in range(3)] + [f"during-{i}" for i in range(200)]
    assert seen == expected


async def test_events_follow_applies_the_filters_to_live_events(
    served: tuple[Control, AdminServer],
) -> None:
    control, server = served
    log = control.ctx.events
    async with AdminClient(server.path) as client:
        stream = client.events(scale_set="macos", follow=True)
        first = asyncio.ensure_future(stream.__anext__())
        while not first.done():  # until the server follows: what comes next is live
            log.record("scale_set", "macos", "resumed", scale_set="macos")
            await asyncio.wait({first}, timeout=0.01)
        log.record("scale_set", "linux", "paused", scale_set="linux")
        log.record("scale_set", "macos", "paused", scale_set="macos")
        live: list[dict[str, Any]] = []
        while not live or live[-1]["action"] != "paused":
            live.append(await asyncio.wait_for(stream.__anext__(), WAIT))
        await stream.aclose()
    # Checked to fail with the follower's filter left out: linux's pause arrives first.
    assert first.result()["name"] == "macos"
    assert {e["name"] for e in live} == {"macos"}, live


async def test_a_follower_that_falls_behind_is_cut_off(short_dir: Path) -> None:
    control = make_control(short_dir)
    server = await serve_admin(control, str(short_dir / "rungar.sock"), follow_buffer=2)
    log = control.ctx.events
    try:
        async with AdminClient(server.path) as client:
            stream = client.events(follow=True)
            first = asyncio.ensure_future(stream.__anext__())
            while not first.done():  # until the server follows: then nothing is missed
                log.record("runner", "r0", "created")
                await asyncio.wait({first}, timeout=0.01)
            for i in range(50):  # in one turn of the loop: the server cannot keep up
                log.record("runner", f"r{i}", "created")
            with pytest.raises(AdminError) as found:
                async for _ in stream:
                    pass
    finally:
        await server.stop(None)
    assert found.value.code == "cut_off"
    assert "more than 2 events were waiting" in str(found.value)
