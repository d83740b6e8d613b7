"""The fault proxy against an echo server: each mode does what docs/testing.md says, switched
while connections are open, and stop() leaves nothing open."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from rungar.testing.fault_proxy import FaultProxy, Mode
from tests.waiting import WAIT, until


@dataclass
class Echo:
    """Echoes what it reads; remembers the size of each read and how many connections came."""

    server: asyncio.Server | None = None
    reads: list[int] = field(default_factory=list)
    accepted: int = 0
    ended: list[BaseException | None] = field(default_factory=list)  # how each connection ended
    writers: list[asyncio.StreamWriter] = field(default_factory=list)  # to send unasked

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        self.writers.append(writer)
        try:
            while data := await reader.read(65536):
                self.reads.append(len(data))
                writer.write(data)
                await writer.drain()
            self.ended.append(None)
        except ConnectionError as e:
            self.ended.append(e)
        finally:
            writer.close()

    @property
    def port(self) -> int:
        assert self.server is not None
        port: int = self.server.sockets[0].getsockname()[1]
        return port


@pytest.fixture
async def echo() -> AsyncIterator[Echo]:
    found = Echo()
    found.server = await asyncio.start_server(found.handle, "127.0.0.1", 0)
    yield found
    found.server.close()


@pytest.fixture
async def proxy(echo: Echo) -> AsyncIterator[FaultProxy]:
    made = FaultProxy("127.0.0.1", echo.port)
    await made.start()
    yield made
    await made.stop()


async def connect(proxy: FaultProxy) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", proxy.port)


async def round_trip(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, data: bytes
) -> bytes:
    writer.write(data)
    await writer.drain()
    return await asyncio.wait_for(reader.readexactly(len(data)), WAIT)


async def test_pass_forwards_both_ways(proxy: FaultProxy, echo: Echo) -> None:
    reader, writer = await connect(proxy)
    assert await round_trip(reader, writer, b"hello") == b"hello"
    assert proxy.address == f"127.0.0.1:{proxy.port}"
    assert (proxy.counts.to_target, proxy.counts.to_client) == (5, 5)
    writer.close()


async def test_blackhole_holds_both_ways_on_open_and_new_connections_until_healed(
    proxy: FaultProxy, echo: Echo
) -> None:
    old_reader, old_writer = await connect(proxy)
    assert await round_trip(old_reader, old_writer, b"before") == b"before"
    proxy.set_mode(Mode.BLACKHOLE)
    old_writer.write(b"held")
    new_reader, new_writer = await connect(proxy)  # accepted, but reaches nothing yet
    new_writer.write(b"new")
    await until(lambda: proxy.counts.held == 4, "the proxy holding what the old one sent")
    await until(lambda: proxy.counts.accepted == 2, "the proxy accepting the new one")
    # Both connections stay open, the echo server saw neither the bytes nor the new connection.
    assert (echo.reads, echo.accepted, proxy.open_connections) == ([6], 1, 2)
    proxy.set_mode(Mode.PASS)
    assert await asyncio.wait_for(old_reader.readexactly(4), WAIT) == b"held"
    assert await asyncio.wait_for(new_reader.readexactly(3), WAIT) == b"new"
    assert echo.accepted == 2 and proxy.counts.held == 0
    old_writer.close()
    new_writer.close()


async def test_blackhole_holds_what_the_target_sends_too(proxy: FaultProxy, echo: Echo) -> None:
    reader, writer = await connect(proxy)
    assert await round_trip(reader, writer, b"x") == b"x"
    proxy.set_mode(Mode.BLACKHOLE)
    echo.writers[0].write(b"ping")  # the target speaks first
    await until(lambda: proxy.counts.held == 4, "the proxy holding what the target sent")
    assert proxy.counts.to_client == 1
    proxy.set_mode(Mode.PASS)
    assert await asyncio.wait_for(reader.readexactly(4), WAIT) == b"ping"
    writer.close()


async def test_delay_adds_its_latency_to_each_chunk(proxy: FaultProxy) -> None:
    reader, writer = await connect(proxy)
    assert await round_trip(reader, writer, b"warm") == b"warm"
    proxy.set_mode(Mode.DELAY, delay=0.2)
    started = time.monotonic()
    assert await round_trip(reader, writer, b"slow") == b"slow"
    assert time.monotonic() - started >= 0.4  # 0.2 s each way
    writer.close()


async def test_reset_sends_rst_to_open_and_new_connections_then_pass_heals(
    proxy: FaultProxy, echo: Echo
) -> None:
    reader, writer = await connect(proxy)
    assert await round_trip(reader, writer, b"hi") == b"hi"
    proxy.set_mode(Mode.RESET)
    with pytest.raises(ConnectionResetError):  # an RST, not an end of stream
        await asyncio.wait_for(reader.read(10), WAIT)
    # The target's side is reset too.
    await until(lambda: echo.ended, "the echo server's connection to end")
    assert isinstance(echo.ended[0], ConnectionResetError)
    new_reader, _ = await connect(proxy)
    with pytest.raises(ConnectionResetError):
        await asyncio.wait_for(new_reader.read(10), WAIT)
    assert proxy.counts.reset == 2 and echo.accepted == 1 and proxy.open_connections == 0
    proxy.set_mode(Mode.PASS)
    reader, writer = await connect(proxy)
    assert await round_trip(reader, writer, b"again") == b"again"
    writer.close()


async def test_drip_forwards_a_few_bytes_at_a_time(proxy: FaultProxy, echo: Echo) -> None:
    reader, writer = await connect(proxy)
    proxy.set_mode(Mode.DRIP, drip_bytes=3, drip_every=0.05)
    started = time.monotonic()
    assert await round_trip(reader, writer, b"abcdefghijkl") == b"abcdefghijkl"
    assert echo.reads == [3, 3, 3, 3]
    # 4 pieces each way with 3 pauses between them (the ways overlap: the echo answers each piece)
    assert time.monotonic() - started >= 3 * 0.05
    writer.close()


async def test_stop_closes_every_connection_and_the_port(echo: Echo) -> None:
    proxy = FaultProxy("127.0.0.1", echo.port)
    await proxy.start()
    port = proxy.port
    reader, writer = await connect(proxy)
    assert await round_trip(reader, writer, b"up") == b"up"
    proxy.set_mode(Mode.BLACKHOLE)
    held_reader, _ = await connect(proxy)
    await until(lambda: proxy.counts.accepted == 2, "the second connection")
    await proxy.stop()
    for each in (reader, held_reader):
        with pytest.raises(ConnectionResetError):
            await asyncio.wait_for(each.read(10), WAIT)
    assert proxy.open_connections == 0
    with pytest.raises(ConnectionRefusedError):
        await asyncio.open_connection("127.0.0.1", port)
    writer.close()


async def test_a_connection_held_by_a_partition_is_reset_when_the_mode_turns_to_reset(
    proxy: FaultProxy, echo: Echo
) -> None:
    proxy.set_mode(Mode.BLACKHOLE)
    reader, _ = await connect(proxy)
    await until(lambda: proxy.open_connections == 1, "the proxy holding the connection")
    proxy.set_mode(Mode.RESET)
    with pytest.raises(ConnectionResetError):
        await asyncio.wait_for(reader.read(10), WAIT)
    proxy.set_mode(Mode.PASS)
    reader, writer = await connect(proxy)
    assert await round_trip(reader, writer, b"next") == b"next"
    assert echo.accepted == 1, "the held connection never reached the target"
    writer.close()
