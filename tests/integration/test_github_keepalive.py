"""The GitHub client's HTTP sender against a real loopback server: connections reused, bodies
framed every way HTTP/1.1 frames them, requests written as httpx's client wrote them, and
failures raised as httpx's exceptions, which the client's retries already know
(rungar/github/keepalive.py)."""

from __future__ import annotations

import asyncio
import gzip
import ssl
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import httpx
import pytest
import trustme

from rungar.github.keepalive import KeepAliveSender
from rungar.github.service import http_client
from rungar.github.transport import HttpxSender, Sender, encode_json

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
async def serving(
    answer: Answer, tls: ssl.SSLContext | None = None
) -> AsyncIterator[tuple[Server, str]]:
    server = Server(answer)
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0, ssl=tls)
    port = listener.sockets[0].getsockname()[1]
    try:
        yield server, f"{'https' if tls else 'http'}://127.0.0.1:{port}"
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


@asynccontextmanager
async def sending(sender: Sender | None = None) -> AsyncIterator[Sender]:
    sender = sender or http_client()
    try:
        yield sender
    finally:
        await sender.aclose()


async def test_requests_one_after_another_reuse_one_connection() -> None:
    async with serving(_json(b'{"ok": 1}')) as (server, url), sending() as client:
        for n in range(5):
            body = encode_json({"name": f"r{n}"})
            answer = await client.send("POST", f"{url}/jit?n={n}", {}, body)
            assert answer.status == 201 and answer.json() == {"ok": 1}
        assert server.connections == 1
        assert server.requests[3].startswith(b"POST /jit?n=3 HTTP/1.1\r\n")
        assert server.requests[3].endswith(b'{"name":"r3"}')


async def test_requests_in_flight_at_once_each_get_a_connection_and_all_are_kept() -> None:
    async def slow(head: bytes, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(0)  # yields: every request is in flight before the first answer
        return await _json(b"{}")(head, r, w)

    async with serving(slow) as (server, url), sending() as client:
        await asyncio.gather(*(client.send("GET", f"{url}/{n}", {}) for n in range(8)))
        first = server.connections
        await asyncio.gather(*(client.send("GET", f"{url}/{n}", {}) for n in range(8)))
        assert server.connections == first  # the second round found them all idle


async def test_a_connection_the_server_closed_is_not_used_again() -> None:
    async with serving(_json(b"{}", b"connection: close")) as (server, url):
        async with sending() as client:
            for _ in range(3):
                assert (await client.send("GET", url, {})).status == 201
        assert server.connections == 3


async def test_a_connection_closed_while_idle_is_replaced() -> None:
    sender = KeepAliveSender()
    async with serving(_json(b"{}")) as (server, url):
        async with sending(sender) as client:
            await client.send("GET", url, {})
            server.writers[0].close()  # the server drops the idle connection
            await server.writers[0].wait_closed()
            (idle,) = next(iter(sender._idle.values()))
            deadline = asyncio.get_running_loop().time() + 30
            while not idle.reader.at_eof():  # until the client's loop has read the hang-up
                assert asyncio.get_running_loop().time() < deadline
                await asyncio.sleep(0.01)
            assert (await client.send("GET", url, {})).status == 201
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

    async with serving(chunked) as (server, url), sending() as client:
        for _ in range(2):
            assert (await client.send("GET", url, {})).json() == {"jobs": [1, 2, 3]}
        assert server.connections == 1


async def test_a_body_that_ends_with_the_connection_is_read_to_its_end() -> None:
    async def until_close(_: bytes, __: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\n\r\nall of it")
        return False

    async with serving(until_close) as (_, url), sending() as client:
        assert (await client.send("GET", url, {})).body == b"all of it"


async def test_an_answer_slower_than_the_read_timeout_raises_read_timeout() -> None:
    async def never(_: bytes, __: asyncio.StreamReader, ___: asyncio.StreamWriter) -> bool:
        await asyncio.Event().wait()
        return False

    async with serving(never) as (_, url), sending(http_client(timeout=0.2)) as client:
        with pytest.raises(httpx.ReadTimeout):
            await client.send("GET", url, {})


async def test_a_server_that_hangs_up_without_answering_raises_a_protocol_error() -> None:
    async def hang_up(_: bytes, __: asyncio.StreamReader, ___: asyncio.StreamWriter) -> bool:
        return False

    async with serving(hang_up) as (_, url), sending() as client:
        with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
            await client.send("GET", url, {})


async def test_nothing_listening_raises_connect_error() -> None:
    listener = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    listener.close()
    await listener.wait_closed()
    async with sending() as client:
        with pytest.raises(httpx.ConnectError):
            await client.send("GET", f"http://127.0.0.1:{port}/", {})


async def test_a_connection_idle_past_the_keepalive_expiry_is_not_reused() -> None:
    now = [0.0]
    sender = KeepAliveSender(keepalive_expiry=5.0, monotonic=lambda: now[0])
    async with serving(_json(b"{}")) as (server, url):
        async with sending(sender) as client:
            await client.send("GET", url, {})
            now[0] = 4.0
            await client.send("GET", url, {})
            now[0] = 9.5
            await client.send("GET", url, {})
        assert server.connections == 2


def _seen(raw: bytes) -> tuple[str, list[tuple[str, str]], bytes]:
    """A request as the server read it: its request line, its headers (lower-case names, in
    no particular order) and its body."""
    head, _, body = raw.partition(b"\r\n\r\n")
    line, *fields = head.decode("ascii").split("\r\n")
    pairs = [f.split(":", 1) for f in fields]
    return line, sorted((name.lower(), value.strip()) for name, value in pairs), body


AUTH = {"Authorization": "Bearer t", "User-Agent": "rungar/test"}
REQUESTS: list[tuple[str, str, dict[str, str], bytes, dict[str, str] | None]] = [
    (
        "POST",
        "/_apis/runtime/runnerscalesets/7/generatejitconfig",
        {**AUTH, "Content-Type": "application/json"},
        encode_json({"name": "rünner-1", "workFolder": ""}),
        {"api-version": "6.0-preview"},
    ),
    ("GET", "/_apis/runtime/runnergroups/", AUTH, b"", {"groupName": "my group/ü&=+"}),
    ("GET", "/message?sessionId=ab-12&lastMessageId=5", {**AUTH, "Accept": "x/y"}, b"", None),
    ("GET", "/agents?stale=1", AUTH, b"", {"agentName": "r 1"}),  # the parameters replace it
    ("GET", "/agents?stale=1", AUTH, b"", {}),  # empty parameters drop the query, as httpx did
    ("PATCH", "/sessions/7", AUTH, b"", None),  # Content-Length: 0, as for every POST/PATCH
    ("DELETE", "/runners/12", AUTH, b"", None),
    ("POST", "/acquirejobs", AUTH, b"[1,2]", None),
    ("GET", "/repos/o/r/a b/ü{x}`", AUTH, b"", None),  # encoded the way httpx encodes it
    ("GET", "/a/./b/../c%2Fd", AUTH, b"", None),  # dot segments removed, escapes kept
]


async def test_each_request_reaches_the_server_as_httpx_s_client_wrote_it() -> None:
    async with (
        serving(_json(b"{}")) as (server, url),
        sending(HttpxSender(httpx.AsyncClient())) as before,
        sending() as now,
    ):
        for method, path, headers, body, params in REQUESTS:
            for sender in (before, now):
                answer = await sender.send(method, url + path, headers, body, params, 5.0)
                assert answer.status == 201
    sent = [_seen(raw) for raw in server.requests]
    for k, (method, path, *_) in enumerate(REQUESTS):
        assert sent[2 * k + 1] == sent[2 * k], f"{method} {path}"
    assert sent[0][1].count(("content-type", "application/json")) == 1
    assert ("accept-encoding", "gzip, deflate") in sent[1][1]


@pytest.mark.parametrize(
    ("url", "params"),
    [
        ("https://api.github.com/orgs/octo", None),
        ("https://API.GitHub.com:443/orgs/octo?per_page=100", None),
        ("http://127.0.0.1:80/x", {"a": "1"}),
        ("http://localhost:8080", None),
        ("https://pipelines.actions.githubusercontent.com/abc/_apis/x", {"api-version": "6.0"}),
        ("https://broker.actions.githubusercontent.com/message?sessionId=1#frag", None),
        ("https://[::1]:8443/x", None),
    ],
)
def test_the_origin_and_target_are_those_httpx_sends(
    url: str, params: dict[str, str] | None
) -> None:
    origin, target = KeepAliveSender()._address(url, params)
    request = httpx.Request("GET", url, params=params)
    assert target == request.url.raw_path.decode()
    assert origin.host_line == f"Host: {request.headers['host']}"
    assert (origin.host, origin.port) == (
        request.url.host,
        request.url.port or (443 if request.url.scheme == "https" else 80),
    )


def _answer(head: bytes, body: bytes) -> Answer:
    async def answer(_: bytes, __: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        writer.write(head + b"content-length: %d\r\n\r\n" % len(body) + body)
        return True

    return answer


@pytest.mark.parametrize(
    ("encoding", "packed"),
    [
        (b"gzip", gzip.compress(b'{"a": 1}', mtime=0)),
        (b"deflate", zlib.compress(b'{"a": 1}')),
        (b"deflate", zlib.compress(b'{"a": 1}')[2:-4]),  # the raw stream some servers send
        (b"identity", b'{"a": 1}'),
        (b"br", b'{"a": 1}'),  # not asked for: left as it came, as httpx left it
    ],
    # Named, not by their bytes: a gzip header holds the time it was made, and the test
    # workers, which each collect the tests, must name them alike.
    ids=["gzip", "deflate", "raw-deflate", "identity", "br"],
)
async def test_an_encoded_answer_is_decoded_and_its_headers_read_as_httpx_read_them(
    encoding: bytes, packed: bytes
) -> None:
    head = b"HTTP/1.1 200 OK\r\ncontent-encoding: %s\r\nX-Twice: 1\r\nx-twice: 2\r\n" % encoding
    async with (
        serving(_answer(head, packed)) as (_, url),
        sending(HttpxSender(httpx.AsyncClient())) as before,
        sending() as now,
    ):
        old = await before.send("GET", url, {})
        new = await now.send("GET", url, {})
    assert new.body == old.body
    assert new.headers == old.headers
    assert new.headers["x-twice"] == "1, 2"
    if encoding != b"br":
        assert new.json() == {"a": 1}


async def test_a_body_that_is_not_the_gzip_it_claims_raises_a_decoding_error() -> None:
    head = b"HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\n"
    async with serving(_answer(head, b"not gzip")) as (_, url), sending() as client:
        with pytest.raises(httpx.DecodingError):
            await client.send("GET", url, {})


async def test_a_header_with_a_line_break_is_refused_before_anything_is_sent() -> None:
    async with serving(_json(b"{}")) as (server, url), sending() as client:
        with pytest.raises(httpx.LocalProtocolError):
            await client.send("GET", url, {"Authorization": "Bearer t\r\nX-Evil: 1"})
    assert server.requests == []


async def test_tls_is_verified_against_the_configured_trust() -> None:
    ca = trustme.CA()
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(served)
    trusting = ssl.create_default_context()
    ca.configure_trust(trusting)
    async with serving(_json(b'{"ok": 1}'), served) as (server, url):
        async with sending(KeepAliveSender(verify=trusting)) as client:
            for _ in range(2):
                assert (await client.send("GET", url, {})).json() == {"ok": 1}
        assert server.connections == 1
        async with sending() as default:  # the system's trust does not know this CA
            with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await default.send("GET", url, {})
