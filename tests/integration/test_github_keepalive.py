"""The GitHub client's HTTP transport against a real loopback server: connections reused, bodies
framed every way HTTP/1.1 frames them, and failures raised as httpx's exceptions, which the
client's retries already know (rungar/github/keepalive.py)."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import httpx
import pytest

from rungar.github.keepalive import KeepAliveTransport
from rungar.github.service import http_client

Answer = Callable[[bytes, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[bool]]


class Server:
    """Answers each request on a connection with ``answer`` until it says to stop."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.connections = 0
        self.requests: list[bytes] = []
        self.writers: list[asyncio.StreamWriter] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                body = await reader.readexactly(length) if length else b""
                self.requests.append(head + body)
                if not await self.answer(head, reader, writer):
                    break
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()


@asynccontextmanager
async def serving(answer: Answer) -> AsyncIterator[tuple[Server, str]]:
    server = Server(answer)
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    try:
        yield server, f"http://127.0.0.1:{port}"
    finally:
        for writer in server.writers:
            writer.close()
        listener.close()


def _json(body: bytes, *extra: bytes) -> Answer:
    async def answer(_: bytes, __: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        head = [b"HTTP/1.1 201 Created", b"content-type: application/json", *extra]
        head.append(b"content-length: %d" % len(body))
        writer.write(b"\r\n".join(head) + b"\r\n\r\n" + body)
        return b"connection: close" not in extra

    return answer


async def test_requests_one_after_another_reuse_one_connection() -> None:
    async with serving(_json(b'{"ok": 1}')) as (server, url), http_client() as client:
        for n in range(5):
            answer = await client.post(f"{url}/jit?n={n}", json={"name": f"r{n}"})
            assert answer.status_code == 201 and answer.json() == {"ok": 1}
        assert server.connections == 1
        assert server.requests[3].startswith(b"POST /jit?n=3 HTTP/1.1\r\n")
        assert server.requests[3].endswith(b'{"name":"r3"}')


async def test_requests_in_flight_at_once_each_get_a_connection_and_all_are_kept() -> None:
    async def slow(head: bytes, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(0)  # yields: every request is in flight before the first answer
        return await _json(b"{}")(head, r, w)

    async with serving(slow) as (server, url), http_client() as client:
        await asyncio.gather(*(client.get(f"{url}/{n}") for n in range(8)))
        first = server.connections
        await asyncio.gather(*(client.get(f"{url}/{n}") for n in range(8)))
        assert server.connections == first  # the second round found them all idle


async def test_a_connection_the_server_closed_is_not_used_again() -> None:
    async with serving(_json(b"{}", b"connection: close")) as (server, url):
        async with http_client() as client:
            for _ in range(3):
                assert (await client.get(url)).status_code == 201
        assert server.connections == 3


async def test_a_connection_closed_while_idle_is_replaced() -> None:
    transport = KeepAliveTransport()
    async with serving(_json(b"{}")) as (server, url):
        async with httpx.AsyncClient(transport=transport) as client:
            await client.get(url)
            server.writers[0].close()  # the server drops the idle connection
            await server.writers[0].wait_closed()
            (idle,) = next(iter(transport._idle.values()))
            deadline = asyncio.get_running_loop().time() + 30
            while not idle.reader.at_eof():  # until the client's loop has read the hang-up
                assert asyncio.get_running_loop().time() < deadline
                await asyncio.sleep(0.01)
            assert (await client.get(url)).status_code == 201
        assert server.connections == 2


async def test_a_chunked_gzip_body_is_read_whole_and_decoded() -> None:
    packed = gzip.compress(b'{"jobs": [1, 2, 3]}')

    async def chunked(_: bytes, __: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n")
        writer.write(b"content-encoding: gzip\r\n\r\n")
        for k in range(0, len(packed), 7):
            piece = packed[k : k + 7]
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        writer.write(b"0\r\n\r\n")
        return True

    async with serving(chunked) as (server, url), http_client() as client:
        for _ in range(2):
            assert (await client.get(url)).json() == {"jobs": [1, 2, 3]}
        assert server.connections == 1


async def test_a_body_that_ends_with_the_connection_is_read_to_its_end() -> None:
    async def until_close(_: bytes, __: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\n\r\nall of it")
        return False

    async with serving(until_close) as (_, url), http_client() as client:
        assert (await client.get(url)).text == "all of it"


async def test_an_answer_slower_than_the_read_timeout_raises_read_timeout() -> None:
    async def never(_: bytes, __: asyncio.StreamReader, ___: asyncio.StreamWriter) -> bool:
        await asyncio.Event().wait()
        return False

    async with serving(never) as (_, url), http_client(timeout=0.2) as client:
        with pytest.raises(httpx.ReadTimeout):
            await client.get(url)


async def test_a_server_that_hangs_up_without_answering_raises_a_protocol_error() -> None:
    async def hang_up(_: bytes, __: asyncio.StreamReader, ___: asyncio.StreamWriter) -> bool:
        return False

    async with serving(hang_up) as (_, url), http_client() as client:
        with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
            await client.get(url)


async def test_nothing_listening_raises_connect_error() -> None:
    listener = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    listener.close()
    await listener.wait_closed()
    async with httpx.AsyncClient(transport=KeepAliveTransport()) as client:
        with pytest.raises(httpx.ConnectError):
            await client.get(f"http://127.0.0.1:{port}/")


async def test_a_connection_idle_past_the_keepalive_expiry_is_not_reused() -> None:
    now = [0.0]
    transport = KeepAliveTransport(keepalive_expiry=5.0, monotonic=lambda: now[0])
    async with serving(_json(b"{}")) as (server, url):
        async with httpx.AsyncClient(transport=transport) as client:
            await client.get(url)
            now[0] = 4.0
            await client.get(url)
            now[0] = 9.5
            await client.get(url)
        assert server.connections == 2
