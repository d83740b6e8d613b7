"""``KeepAliveSender``: how the GitHub client's requests reach GitHub (HTTP/1.1, keep-alive).

docs/benchmarks.md, "Where the daemon's CPU goes". During a burst every runner costs one REST
call (the JIT registration), 64 of them in flight. Two costs were cut, in turn:

* httpcore's pool walked every connection it held for each request and asked each idle one's
  socket whether the server closed it (about 1.8 ms of CPU a request at 64 in flight). Here each
  origin's idle connections are a stack and a request takes the most recently used one: O(1),
  and a connection the server closed is known from the stream's end of file, which the event
  loop has already read, without a system call.
* httpx's client API around it (a ``Request`` and ``URL`` parsed twice, the cookie jar, a
  ``Response`` and its decoders: about half of a JIT call's CPU after the first cut). Here the
  request's head is written from strings: the origin's address and ``Host`` line are worked out
  once per origin, the path is sent as given when it needs no encoding (httpx's own parse is
  the fallback for any that does), and the answer is read into the client's ``Response``.

It behaves as the httpx client it replaces did: the same headers (``Accept: */*``,
``Accept-Encoding: gzip, deflate`` with the answer decoded, ``Connection: keep-alive``, the
caller's headers over those), query parameters replacing the URL's query and encoded as httpx
encodes them, a JSON body's ``Content-Length``, connect/write/read timeouts, TLS verified with
the default context, and httpx's exception classes (``ConnectError``, ``ConnectTimeout``,
``ReadTimeout``, ``RemoteProtocolError``, ``ReadError``, ``DecodingError``), which the client's
retries already treat as transient. Cookies are not kept between calls: GitHub's API does not
use them, and the scale-set clients GitHub publishes (Go, with no cookie jar) keep none.

What it does not do, on purpose: HTTP/2, proxies (httpx ignored proxy variables when given a
transport, as it was), and a cap on connections (every scale set's listener holds one in a long
poll). A request that fails mid-way closes its connection; one that finds its reused connection
closed under it raises ``httpx.RemoteProtocolError``, and the caller's retries decide.
"""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
import time
import zlib
from collections.abc import Callable, Mapping
from typing import NamedTuple
from urllib.parse import urlencode

import httpx

from rungar.github.transport import Response

__all__ = ["KeepAliveSender"]

# Bytes of a response's status line and headers at most (asyncio's default stream limit).
HEADER_LIMIT = 64 * 1024
READ_CHUNK = 64 * 1024
ACCEPT_ENCODING = "gzip, deflate"
# Headers every request carries unless the caller names them (httpx's client defaults).
DEFAULT_HEADERS = (
    ("accept", "Accept: */*"),
    ("accept-encoding", f"Accept-Encoding: {ACCEPT_ENCODING}"),
    ("connection", "Connection: keep-alive"),
)
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})

# An absolute URL whose path and query need no percent-encoding (the characters httpx leaves
# as they are) and no dot segments removed: sent as written. Anything else goes through httpx.
_PLAIN_URL = re.compile(
    r"(https?://[^/?#@\[\]\\\s]+)"
    r"(/[^\x00-\x20\"#<>?`{}\x7f-\U0010ffff]*)"
    r"(\?[^\x00-\x20\"#<>\x7f-\U0010ffff]*)?\Z"
)


class _Origin(NamedTuple):
    scheme: str
    host: str
    port: int
    host_line: str  # "Host: ..." as httpx writes it (the port only when not the default)


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


class KeepAliveSender:
    """HTTP/1.1 with keep-alive connections reused most-recent-first, per origin.

    ``keepalive_expiry`` (seconds, httpx's default 5) closes a connection idle for longer
    rather than reuse it; ``max_idle`` bounds the idle connections kept per origin; ``timeout``
    is the connect, write and read timeout of a request that names none."""

    def __init__(
        self,
        *,
        verify: ssl.SSLContext | bool = True,
        keepalive_expiry: float = 5.0,
        max_idle: int = 100,
        timeout: float = 30.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._verify = verify
        self._ssl: ssl.SSLContext | None = None
        self._keepalive_expiry = keepalive_expiry
        self._max_idle = max_idle
        self._timeout = timeout
        self._monotonic = monotonic
        self._origins: dict[str, _Origin] = {}
        self._idle: dict[_Origin, list[_Connection]] = {}
        self._closed = False

    async def send(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes = b"",
        params: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Response:
        if self._closed:
            raise RuntimeError("the sender is closed")
        origin, target = self._address(url, params)
        head = _head(method, target, origin.host_line, headers, body)
        if timeout is None:
            timeout = self._timeout
        connection = self._take(origin)
        if connection is None:
            connection = await self._connect(origin, timeout)
        keep = False
        try:
            connection.writer.write(head + body if body else head)
            if connection.writer.transport.get_write_buffer_size() > READ_CHUNK:
                await _drain(connection.writer, timeout)
            status, fields, content, keep = await _read_response(connection.reader, method, timeout)
        except TimeoutError as e:
            raise httpx.ReadTimeout("timed out reading the response") from e
        except asyncio.IncompleteReadError as e:
            raise httpx.RemoteProtocolError(
                "Server disconnected without sending a response."
            ) from e
        except asyncio.LimitOverrunError as e:
            raise httpx.RemoteProtocolError("response headers too long") from e
        except (ConnectionError, OSError) as e:
            raise httpx.ReadError(str(e) or type(e).__name__) from e
        finally:
            if keep:
                self._give_back(origin, connection)
            else:
                connection.close()
        encoding = fields.get("content-encoding")
        if encoding is not None and content:
            content = _decode(content, encoding)
        return Response(status, fields, content)

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                connection.close()

    # ---- addresses ----------------------------------------------------------------------

    def _address(self, url: str, params: Mapping[str, str] | None) -> tuple[_Origin, str]:
        """The origin and the request target (path and query) httpx would have sent."""
        plain = _PLAIN_URL.match(url)
        if plain is None or "/." in plain[2]:
            return self._parsed(url, params)
        base, target = plain[1], plain[2]
        origin = self._origins.get(base)
        if origin is None:
            origin = self._origins[base] = _origin(httpx.URL(base))
        if params is None:
            if plain[3] is not None:
                target += plain[3]
        elif params:  # httpx replaces the URL's query with the parameters
            target += "?" + urlencode(list(params.items()))
        return origin, target

    def _parsed(self, url: str, params: Mapping[str, str] | None) -> tuple[_Origin, str]:
        parsed = httpx.URL(url) if params is None else httpx.URL(url, params=params)
        if parsed.scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"unsupported URL scheme {parsed.scheme!r}")
        return _origin(parsed), parsed.raw_path.decode("ascii")

    # ---- the pool -----------------------------------------------------------------------

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

    async def _connect(self, origin: _Origin, timeout: float) -> _Connection:
        host, port = origin.host, origin.port
        context = self._context() if origin.scheme == "https" else None
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
            raise httpx.ConnectTimeout(f"connecting to {host}:{port} timed out") from e
        except OSError as e:
            raise httpx.ConnectError(str(e) or type(e).__name__) from e
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


def _origin(url: httpx.URL) -> _Origin:
    scheme = url.scheme
    port = url.port or (443 if scheme == "https" else 80)
    return _Origin(scheme, url.host, port, "Host: " + url.netloc.decode("ascii"))


def _head(
    method: str, target: str, host_line: str, headers: Mapping[str, str], body: bytes
) -> bytes:
    """The request line and headers, as httpx's client wrote them."""
    given = {name.lower() for name in headers}
    lines = [f"{method} {target} HTTP/1.1", host_line]
    lines.extend(line for name, line in DEFAULT_HEADERS if name not in given)
    for name, value in headers.items():
        if "\n" in value or "\r" in value:
            raise httpx.LocalProtocolError(f"header {name!r} holds a line break")
        lines.append(f"{name}: {value}")
    if (body or method in BODY_METHODS) and "content-length" not in given:
        lines.append(f"Content-Length: {len(body)}")
    lines.append("\r\n")
    # Non-ASCII in a header raises UnicodeEncodeError, as httpx's headers did.
    return "\r\n".join(lines).encode("ascii")


async def _drain(writer: asyncio.StreamWriter, timeout: float) -> None:
    try:
        async with asyncio.timeout(timeout):
            await writer.drain()
    except TimeoutError as e:
        raise httpx.WriteTimeout("timed out sending the request") from e


async def _read_response(
    reader: asyncio.StreamReader, method: str, timeout: float
) -> tuple[int, dict[str, str], bytes, bool]:
    """Status, headers (lower-case names, repeated ones joined with ", "), the body as sent,
    and whether the connection may be used again."""
    async with asyncio.timeout(timeout):
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            status, fields = _parse_head(head)
            if not 100 <= status < 200:  # an interim answer (100 Continue) comes first
                break
    keep = "close" not in fields.get("connection", "").lower()
    async with asyncio.timeout(timeout):
        if method == "HEAD" or status in (204, 304):
            content = b""
        elif "chunked" in fields.get("transfer-encoding", "").lower():
            content = await _read_chunked(reader)
        elif "content-length" in fields:
            try:
                length = int(fields["content-length"])
            except ValueError as e:
                raise httpx.RemoteProtocolError("bad Content-Length") from e
            content = await reader.readexactly(length)
        else:  # the body ends with the connection
            content = await reader.read(-1)
            keep = False
    return status, fields, content, keep


def _parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    try:
        text = head[:-4].decode("ascii")
    except UnicodeDecodeError:  # httpx's order: ASCII, then UTF-8, then Latin-1
        try:
            text = head[:-4].decode("utf-8")
        except UnicodeDecodeError:
            text = head[:-4].decode("latin-1")
    status_line, *lines = text.split("\r\n")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
        raise httpx.RemoteProtocolError(f"bad status line {status_line[:80]!r}")
    try:
        status = int(parts[1])
    except ValueError as e:
        raise httpx.RemoteProtocolError(f"bad status {parts[1][:20]!r}") from e
    fields: dict[str, str] = {}
    for line in lines:
        name, sep, value = line.partition(":")
        if not sep:
            raise httpx.RemoteProtocolError(f"bad header line {line[:80]!r}")
        name = name.strip().lower()
        value = value.strip()
        known = fields.get(name)
        fields[name] = value if known is None else f"{known}, {value}"
    return status, fields


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size_line = await reader.readuntil(b"\r\n")
        try:
            size = int(size_line.split(b";", 1)[0].strip(), 16)
        except ValueError as e:
            raise httpx.RemoteProtocolError("bad chunk size") from e
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers, then the blank line
                continue
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)


def _decode(content: bytes, encoding: str) -> bytes:
    """The body with its ``Content-Encoding`` undone, the last applied first; encodings other
    than gzip and deflate (which are all that is asked for) are left as httpx left them."""
    for name in reversed(encoding.split(",")):
        name = name.strip().lower()
        try:
            if name == "gzip":
                unzip = zlib.decompressobj(zlib.MAX_WBITS | 16)
                content = unzip.decompress(content) + unzip.flush()
            elif name == "deflate":
                content = _inflate(content)
        except zlib.error as e:
            raise httpx.DecodingError(f"{name} body: {e}") from e
    return content


def _inflate(content: bytes) -> bytes:
    # "deflate" is meant to be zlib-wrapped, but some servers send the raw stream (httpx
    # accepts both the same way).
    try:
        inflate = zlib.decompressobj()
        return inflate.decompress(content) + inflate.flush()
    except zlib.error:
        inflate = zlib.decompressobj(-zlib.MAX_WBITS)
        return inflate.decompress(content) + inflate.flush()
