"""``KeepAliveTransport``: the HTTP/1.1 transport under the GitHub client's ``httpx.AsyncClient``.

docs/benchmarks.md, "Where the daemon's CPU goes". During a burst every runner costs one REST
call (the JIT registration), 64 of them in flight. httpx's own transport (httpcore's pool) walks
every connection it holds for each request and again as each answer is read, and asks each idle
one's socket whether the server closed it: about 1.8 ms of CPU a request at 64 in flight, most
of a runner's budget. This transport keeps each origin's idle connections on a stack and takes
the most recently used one: a request costs O(1), and a connection the server closed is known
from the stream's end-of-file, which the event loop has already read, without a system call.
The same client API stays (``httpx.AsyncClient``, its timeouts, its exceptions, content
decoding), so callers, retries and tests do not change.

What it does not do, on purpose: HTTP/2, proxies (httpx ignores proxy variables when a
transport is given, as it did before), and a cap on connections (none before either: every
scale set's listener holds one in a long poll). A request that fails mid-way closes its
connection; one that finds its reused connection closed under it raises
``httpx.RemoteProtocolError``, as httpx's own transport does, and the caller's retries decide.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import Callable

import httpx

__all__ = ["KeepAliveTransport"]

# Bytes of a response's status line and headers at most (asyncio's default stream limit).
HEADER_LIMIT = 64 * 1024
READ_CHUNK = 64 * 1024

_Origin = tuple[str, str, int]


class _Connection:
    __slots__ = ("idle_since", "reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.idle_since = 0.0

    def usable(self) -> bool:
        return not self.reader.at_eof() and not self.writer.is_closing()

    def close(self) -> None:
        self.writer.close()


class KeepAliveTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 with keep-alive connections reused most-recent-first, per origin.

    ``keepalive_expiry`` (seconds, httpx's default 5) closes a connection idle for longer
    rather than reuse it; ``max_idle`` bounds the idle connections kept per origin."""

    def __init__(
        self,
        *,
        verify: ssl.SSLContext | bool = True,
        keepalive_expiry: float = 5.0,
        max_idle: int = 100,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._verify = verify
        self._ssl: ssl.SSLContext | None = None
        self._keepalive_expiry = keepalive_expiry
        self._max_idle = max_idle
        self._monotonic = monotonic
        self._idle: dict[_Origin, list[_Connection]] = {}
        self._closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._closed:
            raise RuntimeError("the transport is closed")
        url = request.url
        scheme = url.scheme
        if scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"unsupported URL scheme {scheme!r}", request=request)
        port = url.port or (443 if scheme == "https" else 80)
        origin = (scheme, url.host, port)
        timeouts: dict[str, float | None] = request.extensions.get("timeout", {})
        connection = self._take(origin)
        if connection is None:
            connection = await self._connect(request, origin, timeouts.get("connect"))
        keep = False
        try:
            body = await request.aread()
            self._write(connection, request, body)
            if connection.writer.transport.get_write_buffer_size() > READ_CHUNK:
                async with asyncio.timeout(timeouts.get("write")):
                    await connection.writer.drain()
            status, reason, headers, content, keep = await _read_response(
                connection.reader, request, timeouts.get("read")
            )
        except TimeoutError as e:
            raise httpx.ReadTimeout("timed out reading the response", request=request) from e
        except asyncio.IncompleteReadError as e:
            raise httpx.RemoteProtocolError(
                "Server disconnected without sending a response.", request=request
            ) from e
        except asyncio.LimitOverrunError as e:
            raise httpx.RemoteProtocolError("response headers too long", request=request) from e
        except (ConnectionError, OSError) as e:
            raise httpx.ReadError(str(e) or type(e).__name__, request=request) from e
        finally:
            if keep:
                self._give_back(origin, connection)
            else:
                connection.close()
        return httpx.Response(
            status,
            headers=headers,
            stream=httpx.ByteStream(content),
            request=request,
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": reason},
        )

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                connection.close()

    # ---- the pool ---------------------------------------------------------------------

    def _take(self, origin: _Origin) -> _Connection | None:
        stack = self._idle.get(origin)
        if not stack:
            return None
        oldest = self._monotonic() - self._keepalive_expiry
        while stack:
            connection = stack.pop()
            if connection.idle_since >= oldest and connection.usable():
                return connection
            connection.close()
        return None

    def _give_back(self, origin: _Origin, connection: _Connection) -> None:
        if not connection.usable() or self._closed:
            connection.close()
            return
        stack = self._idle.setdefault(origin, [])
        if len(stack) >= self._max_idle:
            stack.pop(0).close()  # the least recently used
        connection.idle_since = self._monotonic()
        stack.append(connection)

    async def _connect(
        self, request: httpx.Request, origin: _Origin, timeout: float | None
    ) -> _Connection:
        scheme, host, port = origin
        context = self._context() if scheme == "https" else None
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(
                    host,
                    port,
                    ssl=context,
                    server_hostname=host if context is not None else None,
                    limit=HEADER_LIMIT,
                )
        except TimeoutError as e:
            raise httpx.ConnectTimeout(
                f"connecting to {host}:{port} timed out", request=request
            ) from e
        except OSError as e:
            raise httpx.ConnectError(str(e) or type(e).__name__, request=request) from e
        sock = writer.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            # A request's head and body go out in one write; Nagle would still hold back the
            # next request's write behind the delayed ACK of the last one.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return _Connection(reader, writer)

    def _context(self) -> ssl.SSLContext:
        if self._ssl is None:
            verify = self._verify
            self._ssl = (
                verify if isinstance(verify, ssl.SSLContext) else httpx.create_ssl_context(verify)
            )
        return self._ssl

    @staticmethod
    def _write(connection: _Connection, request: httpx.Request, body: bytes) -> None:
        head = [b"%s %s HTTP/1.1" % (request.method.encode("ascii"), request.url.raw_path)]
        head.extend(name + b": " + value for name, value in request.headers.raw)
        connection.writer.write(b"\r\n".join(head) + b"\r\n\r\n" + body)
        # Nothing waits for the write: a request is small and the answer is read next. A large
        # body waits for room in the socket (see the caller's drain).


async def _read_response(
    reader: asyncio.StreamReader, request: httpx.Request, timeout: float | None
) -> tuple[int, bytes, list[tuple[bytes, bytes]], bytes, bool]:
    """Status, reason, headers, body and whether the connection may be used again."""
    async with asyncio.timeout(timeout):
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            status, reason, headers = _parse_head(head, request)
            if not 100 <= status < 200:  # an interim answer (100 Continue) comes first
                break
    fields: dict[bytes, bytes] = {}
    for name, value in headers:
        fields[name.lower()] = value
    keep = b"close" not in fields.get(b"connection", b"").lower()
    async with asyncio.timeout(timeout):
        if request.method == "HEAD" or status in (204, 304):
            content = b""
        elif b"chunked" in fields.get(b"transfer-encoding", b"").lower():
            content = await _read_chunked(reader, request)
        elif b"content-length" in fields:
            try:
                length = int(fields[b"content-length"])
            except ValueError as e:
                raise httpx.RemoteProtocolError("bad Content-Length", request=request) from e
            content = await reader.readexactly(length)
        else:  # the body ends with the connection
            content = await reader.read(-1)
            keep = False
    return status, reason, headers, content, keep


def _parse_head(
    head: bytes, request: httpx.Request
) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
    status_line, *lines = head[:-4].split(b"\r\n")
    parts = status_line.split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
        raise httpx.RemoteProtocolError(f"bad status line {status_line[:80]!r}", request=request)
    try:
        status = int(parts[1])
    except ValueError as e:
        raise httpx.RemoteProtocolError(f"bad status {parts[1][:20]!r}", request=request) from e
    headers: list[tuple[bytes, bytes]] = []
    for line in lines:
        name, sep, value = line.partition(b":")
        if not sep:
            raise httpx.RemoteProtocolError(f"bad header line {line[:80]!r}", request=request)
        headers.append((name.strip(), value.strip()))
    reason = parts[2] if len(parts) > 2 else b""
    return status, reason, headers


async def _read_chunked(reader: asyncio.StreamReader, request: httpx.Request) -> bytes:
    parts: list[bytes] = []
    while True:
        size_line = await reader.readuntil(b"\r\n")
        try:
            size = int(size_line.split(b";", 1)[0].strip(), 16)
        except ValueError as e:
            raise httpx.RemoteProtocolError("bad chunk size", request=request) from e
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers, then the blank line
                continue
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)
