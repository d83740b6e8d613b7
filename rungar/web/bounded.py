"""A bounded HTTP/1.1 server for an ASGI app, on a thread and event loop of its own.

Every listener of the daemon (the webhook receiver, ``/metrics``, dashboards to come) is built
here, so each gets the same limits, so no client can hold one open or feed it without end:

* **header timeout**: a request head must arrive whole within ``header_timeout`` of the
  connection (or of its first byte on a kept-alive connection); otherwise 408 and close. A
  connection that sends nothing at all is closed without an answer (see ``_sweep_silent``).
* **body timeout**: the body must arrive within ``body_timeout`` of the head; otherwise 408.
* **idle timeout**: a kept-alive connection that sends nothing for ``idle_timeout`` is closed.
* **connection cap**: at most ``max_connections`` at once. At the cap a new connection first
  evicts the oldest connection that has not started a request (one that is idle or has sent
  nothing yet), so connections held open by a flood cannot keep a real sender out; when every
  connection is busy with a request, the new one is answered 503 at once and closed.
* **body cap**: a ``Content-Length`` over ``max_body_bytes`` is answered 413 before a byte of
  the body is read; a chunked body is cut off at the cap the same way.
* **TLS** (``tls``, a server context): each connection's handshake must end within the header
  timeout, before its first request.
* **accept errors** (``Too many open files`` and kin) are logged once per burst, with a count
  when the burst ends, never a traceback per connection; refusals at the cap likewise.

Why a thread: a flood is then handled by this loop, not the engine's, so the admin socket, the
provider channels and reconcile passes keep their latency while a listener is busy. The app
runs on the listener's loop; anything it hands the engine must go through the engine loop's
``call_soon_threadsafe`` (see :func:`engine_caller`).

Requests refused by the server itself (timeouts, cap, body cap, malformed HTTP, an app that
raised) are reported to ``on_refused`` with a short outcome word, so a listener can count every
request it received under exactly one outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import resource
import socket
import ssl
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, replace
from http import HTTPStatus
from typing import Any

import h11
import structlog

log = structlog.get_logger("rungar.web")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
AsgiApp = Callable[[Scope, Receive, Send], Awaitable[None]]
Refused = Callable[[str], None]

# Errors that mean "out of file descriptors or memory for now": retried after a pause.
_RESOURCE_ERRORS = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
_CHUNK = 64 * 1024
_ACCEPT_BATCH = 64


@dataclass(frozen=True, slots=True)
class Limits:
    """A listener's bounds; the documented defaults of ``rungar.yaml``'s listener keys."""

    header_timeout: float = 10.0
    body_timeout: float = 10.0
    idle_timeout: float = 5.0
    max_connections: int = 256
    max_body_bytes: int = 1024 * 1024
    max_header_bytes: int = 16 * 1024
    backlog: int = 4096  # the kernel's queue costs no file; a flood must not fill it
    accept_retry: float = 0.1  # pause after an accept error, before trying again


class _Refusal(Exception):
    def __init__(self, status: int, outcome: str) -> None:
        super().__init__(outcome)
        self.status = status
        self.outcome = outcome


class _Burst:
    """Counts a run of like failures and logs it twice: when it starts and when it ends."""

    def __init__(self, event: str, listener: str) -> None:
        self.event = event
        self.listener = listener
        self.count = 0

    def hit(self, **fields: Any) -> None:
        if self.count == 0:
            log.warning(self.event, listener=self.listener, **fields)
        self.count += 1

    def end(self) -> None:
        if self.count:
            log.warning(f"{self.event}_burst", listener=self.listener, count=self.count)
            self.count = 0


class _Conn:
    """One accepted connection. Until its first byte it is only a socket watched by the loop
    (a reader callback: no task, no streams, no timer of its own), so holding thousands of
    silent connections, or evicting them, costs little."""

    __slots__ = ("accepted", "busy", "closed", "peer", "sock", "started", "writer")

    def __init__(self, sock: socket.socket, peer: Any, accepted: float) -> None:
        self.sock = sock
        self.peer = peer
        self.accepted = accepted
        self.writer: asyncio.StreamWriter | None = None
        self.busy = False  # a request head has arrived: not evicted for a newcomer
        self.started = False  # its task runs: the streams own the socket
        self.closed = False


class BoundedHttpServer:
    """Serve ``app`` on ``sock`` (already bound) within ``limits``, on its own thread."""

    def __init__(
        self,
        app: AsgiApp,
        sock: socket.socket,
        limits: Limits | None = None,
        *,
        name: str = "http",
        on_refused: Refused | None = None,
        tls: ssl.SSLContext | None = None,
        background: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.app = app
        self.tls = tls  # set: every connection is TLS, its handshake due within header_timeout
        # Work of the app's own that runs on the listener's loop while it serves (a dashboard's
        # sampler); cancelled when the listener stops.
        self._background = background
        self.limits = limits or Limits()
        self.name = name
        self._sock = sock
        self._on_refused = on_refused
        self._conns: dict[int, _Conn] = {}  # insertion order is age: the oldest first
        self._next_id = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._accept_errors = _Burst("http.accept_failed", name)
        self._busy_refusals = _Burst("http.connections_refused", name)
        host, port = sock.getsockname()[:2]
        self.address = f"{host}:{port}"

    # -- lifecycle, called from any thread -------------------------------------------------

    def start(self) -> None:
        # A cap past the file limit would turn a flood into accept errors (and starve the rest
        # of the daemon of descriptors) instead of evictions: keep it to a quarter of it.
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and self.limits.max_connections > soft // 4:
            log.warning(
                "http.max_connections_lowered",
                listener=self.name,
                configured=self.limits.max_connections,
                used=max(1, soft // 4),
                open_files_limit=soft,
            )
            self.limits = replace(self.limits, max_connections=max(1, soft // 4))
        self._sock.listen(self.limits.backlog)
        self._sock.setblocking(False)
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._main()), name=f"rungar-{self.name}", daemon=True
        )
        self._thread.start()
        self._ready.wait()

    def stop(self, timeout: float = 5.0) -> None:
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None:
            with contextlib.suppress(RuntimeError):  # its loop already ended
                loop.call_soon_threadsafe(stopping.set)
        if self._thread is not None:
            self._thread.join(timeout)
        with contextlib.suppress(OSError):
            self._sock.close()

    @property
    def connections(self) -> int:
        return len(self._conns)

    @property
    def requests_in_progress(self) -> int:
        return sum(conn.busy for conn in list(self._conns.values()))

    # -- the listener's loop ---------------------------------------------------------------

    async def _main(self) -> None:
        loop = self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()  # kept: the loop holds tasks weakly
        loop.add_reader(self._sock.fileno(), self._accept_some)
        sweeping = asyncio.ensure_future(self._sweep_silent())
        working = asyncio.ensure_future(self._background()) if self._background else None
        self._ready.set()
        await self._stopping.wait()
        sweeping.cancel()
        if working is not None:
            working.cancel()
        loop.remove_reader(self._sock.fileno())
        for conn in list(self._conns.values()):
            self._drop(conn)
        self._accept_errors.end()
        self._busy_refusals.end()

    def _accept_some(self) -> None:
        """Accept what waits, a batch at a time so the loop reads between batches."""
        loop = asyncio.get_running_loop()
        for _ in range(_ACCEPT_BATCH):
            try:
                client, peer = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                if e.errno not in _RESOURCE_ERRORS:
                    log.error("http.accept_error", listener=self.name, error=str(e))
                    return
                # Out of files: stop watching for a moment instead of spinning on the error.
                self._accept_errors.hit(error=e.strerror or str(e))
                loop.remove_reader(self._sock.fileno())
                loop.call_later(self.limits.accept_retry, self._resume_accepting)
                return
            self._accept_errors.end()
            client.setblocking(False)
            if not self._admit():
                self._refuse_busy(client)
                continue
            self._busy_refusals.end()
            conn_id = self._next_id
            self._next_id += 1
            self._conns[conn_id] = _Conn(client, peer, loop.time())
            loop.add_reader(client.fileno(), self._first_byte, conn_id)

    def _resume_accepting(self) -> None:
        if self._stopping is not None and not self._stopping.is_set():
            asyncio.get_running_loop().add_reader(self._sock.fileno(), self._accept_some)

    def _first_byte(self, conn_id: int) -> None:
        conn = self._conns.get(conn_id)
        if conn is None:
            return
        asyncio.get_running_loop().remove_reader(conn.sock.fileno())
        conn.started = True
        task = asyncio.ensure_future(self._serve(conn_id, conn))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _sweep_silent(self) -> None:
        """Close connections that sent nothing within the header timeout, uncounted. One sweep
        every quarter of the timeout, oldest first, instead of a timer per connection: a
        silent connection lives at most a quarter longer than the timeout."""
        loop = asyncio.get_running_loop()
        timeout = self.limits.header_timeout
        while True:
            await asyncio.sleep(timeout / 4)
            due = loop.time() - timeout
            for conn_id, conn in list(self._conns.items()):
                if conn.accepted > due:
                    break  # accepted in order: the rest are younger
                if not conn.started:
                    del self._conns[conn_id]
                    self._drop(conn)

    def _drop(self, conn: _Conn) -> None:
        if conn.closed:
            return
        conn.closed = True
        if conn.writer is not None:
            if not conn.writer.transport.is_closing():
                conn.writer.transport.abort()
        elif not conn.started:
            with contextlib.suppress(OSError, ValueError):
                asyncio.get_running_loop().remove_reader(conn.sock.fileno())
            with contextlib.suppress(OSError):
                conn.sock.close()
        # else: its task is making its streams, and closes them when it sees ``closed``

    def _admit(self) -> bool:
        """Room for one more connection, evicting the oldest one not in a request if need be."""
        if len(self._conns) < self.limits.max_connections:
            return True
        for conn_id, conn in self._conns.items():
            if not conn.busy:
                del self._conns[conn_id]
                self._drop(conn)
                return True
        return False

    def _refuse_busy(self, client: socket.socket) -> None:
        self._busy_refusals.hit(max_connections=self.limits.max_connections)
        self._refused("busy")
        with contextlib.suppress(OSError):
            client.send(_BUSY)  # a non-blocking send into an empty buffer: all of it or nothing
        client.close()

    def _refused(self, outcome: str) -> None:
        if self._on_refused is not None:
            self._on_refused(outcome)

    async def _serve(self, conn_id: int, conn: _Conn) -> None:
        try:
            try:
                reader, writer = await self._streams(conn)
            except (OSError, ssl.SSLError, TimeoutError):
                return
            conn.writer = writer
            if not conn.closed:  # else evicted while its streams were made
                await self._requests(conn, reader, writer)
        except (OSError, asyncio.IncompleteReadError):
            pass  # the peer went away or was evicted: nothing to answer
        finally:
            self._conns.pop(conn_id, None)
            if conn.writer is not None and not conn.writer.transport.is_closing():
                conn.writer.transport.abort()
            elif conn.writer is None:
                conn.sock.close()
            conn.closed = True

    async def _streams(self, conn: _Conn) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self.tls is None:
            return await asyncio.open_connection(sock=conn.sock, limit=_CHUNK)
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=_CHUNK, loop=loop)
        protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
        transport, _ = await loop.connect_accepted_socket(
            lambda: protocol,
            conn.sock,
            ssl=self.tls,
            ssl_handshake_timeout=self.limits.header_timeout,
        )
        return reader, asyncio.StreamWriter(transport, protocol, reader, loop)

    async def _requests(
        self, conn: _Conn, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        limits = self.limits
        http = h11.Connection(h11.SERVER, max_incomplete_event_size=limits.max_header_bytes)
        # The first head must be whole within the header timeout of the accept.
        deadline: float | None = conn.accepted + limits.header_timeout
        while True:
            conn.busy = False
            try:
                request = await self._head(http, reader, deadline)
            except _Refusal as r:
                self._refused(r.outcome)
                await self._answer(http, writer, r.status, close=True)
                return
            if request is None:
                return  # closed, or idle too long between requests
            deadline = None
            conn.busy = True
            declared = _content_length(request)
            if declared is not None and declared > limits.max_body_bytes:
                self._refused("too_large")
                await self._answer(http, writer, 413, close=True)
                return
            if not await self._run_app(http, reader, writer, request, conn.peer):
                return
            if http.our_state is h11.MUST_CLOSE or http.their_state is not h11.DONE:
                return
            try:
                http.start_next_cycle()
            except h11.LocalProtocolError:
                return

    async def _head(
        self, http: h11.Connection, reader: asyncio.StreamReader, deadline: float | None
    ) -> h11.Request | None:
        """The next request's head, due by ``deadline`` (None: kept alive, so the idle timeout
        runs until its first byte); None when the peer closed, or sent nothing in time."""
        loop = asyncio.get_running_loop()
        limits = self.limits
        received = 0
        while True:
            try:
                event = http.next_event()
            except h11.RemoteProtocolError as e:
                raise _Refusal(e.error_status_hint, "bad_request") from e
            if isinstance(event, h11.Request):
                return event
            if event is not h11.NEED_DATA:
                return None  # ConnectionClosed
            # Kept alive: the idle timeout runs until the next request's first byte.
            timeout = limits.idle_timeout if deadline is None else deadline - loop.time()
            try:
                data = await asyncio.wait_for(reader.read(_CHUNK), max(0.0, timeout))
            except TimeoutError:
                if not received:
                    return None  # nothing was asked: an idle connection just goes
                raise _Refusal(408, "timeout") from None
            if not data and received:
                raise _Refusal(400, "client_gone")
            received += len(data)
            if deadline is None:
                deadline = loop.time() + limits.header_timeout
            http.receive_data(data)

    async def _run_app(
        self,
        http: h11.Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        request: h11.Request,
        peer: Any,
    ) -> bool:
        """Run the app for one request; False when the connection must close."""
        exchange = _Exchange(http, reader, writer, self.limits, self._write)
        try:
            await self.app(self._scope(request, peer), exchange.receive, exchange.send)
        except (OSError, TimeoutError):
            return False  # the peer stopped reading our answer
        except Exception as e:
            if exchange.refusal is None:
                self._refused("error")
                log.error("http.app_failed", listener=self.name, error=type(e).__name__)
                if not exchange.started:
                    await self._answer(http, writer, 500, close=True)
                return False
        finally:
            exchange.answered.set()  # a receive() the app left waiting (a task) ends now
        if exchange.refusal is not None:
            self._refused(exchange.refusal.outcome)
            if not exchange.started:
                await self._answer(http, writer, exchange.refusal.status, close=True)
            return False
        return exchange.finished

    def _scope(self, request: h11.Request, peer: Any) -> Scope:
        return {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": request.http_version.decode(),
            "method": request.method.decode(),
            "scheme": "https" if self.tls is not None else "http",
            "path": request.target.decode("latin-1").partition("?")[0],
            "raw_path": request.target.partition(b"?")[0],
            "query_string": request.target.partition(b"?")[2],
            "root_path": "",
            "headers": [(k.lower(), v) for k, v in request.headers],
            "client": tuple(peer[:2]) if isinstance(peer, tuple) else None,
            "server": tuple(self._sock.getsockname()[:2]),
        }

    async def _answer(
        self, http: h11.Connection, writer: asyncio.StreamWriter, status: int, *, close: bool
    ) -> None:
        body = b'{"error": "%s"}' % _REASONS.get(status, b"refused")
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        if close:
            headers.append((b"connection", b"close"))
        try:
            if http.our_state is h11.SEND_RESPONSE or http.our_state is h11.IDLE:
                data = http.send(
                    h11.Response(status_code=status, headers=headers, reason=phrase(status))
                )
                data = (data or b"") + (http.send(h11.Data(data=body)) or b"")
                data += http.send(h11.EndOfMessage()) or b""
            else:
                return
        except h11.LocalProtocolError:
            # h11 refuses a response before a request: write one by hand.
            reason = _REASONS.get(status, b"refused")
            head = b"HTTP/1.1 %d %s\r\n" % (status, reason)
            data = head + b"".join(b"%s: %s\r\n" % h for h in headers) + b"\r\n" + body
        with contextlib.suppress(OSError, TimeoutError):
            await self._write(writer, data)

    async def _write(self, writer: asyncio.StreamWriter, data: bytes | None) -> None:
        if data:
            writer.write(data)
            # A peer that does not read its answer is not waited for longer than a body.
            await asyncio.wait_for(writer.drain(), self.limits.body_timeout)


class _Exchange:
    """One request's ASGI ``receive`` and ``send`` over its h11 connection.

    A body refused midway (too slow, too large) or a peer gone: the app is told the client
    disconnected (``refusal`` says why), and the server answers and counts it once the app
    returns. ``answered`` is set once the whole answer is written or the peer stopped reading
    it: a receive() after the body waits for it, as ASGI asks, so a streaming answer is not cut
    short."""

    def __init__(
        self,
        http: h11.Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        limits: Limits,
        write: Callable[[asyncio.StreamWriter, bytes | None], Awaitable[None]],
    ) -> None:
        self.http = http
        self.reader = reader
        self.writer = writer
        self.limits = limits
        self.write = write
        self.loop = asyncio.get_running_loop()
        self.body_deadline = self.loop.time() + limits.body_timeout
        self.started = self.finished = self.ended = False
        self.size = 0
        self.refusal: _Refusal | None = None
        self.answered = asyncio.Event()

    def gone(self, why: _Refusal) -> Message:
        self.refusal = self.refusal or why
        return {"type": "http.disconnect"}

    async def receive(self) -> Message:
        if self.refusal is not None:
            return {"type": "http.disconnect"}
        if self.ended:
            await self.answered.wait()
            return {"type": "http.disconnect"}
        http = self.http
        while True:
            try:
                event = http.next_event()
            except h11.RemoteProtocolError:
                return self.gone(_Refusal(400, "client_gone"))
            if isinstance(event, h11.Data):
                self.size += len(event.data)
                if self.size > self.limits.max_body_bytes:
                    return self.gone(_Refusal(413, "too_large"))
                return {"type": "http.request", "body": bytes(event.data), "more_body": True}
            if isinstance(event, h11.EndOfMessage):
                self.ended = True
                return {"type": "http.request", "body": b"", "more_body": False}
            if event is not h11.NEED_DATA:
                return self.gone(_Refusal(400, "client_gone"))
            remaining = self.body_deadline - self.loop.time()
            try:
                data = await asyncio.wait_for(self.reader.read(_CHUNK), max(0.0, remaining))
            except TimeoutError:
                return self.gone(_Refusal(408, "timeout"))
            http.receive_data(data)  # b"" marks the peer's end: an error event next

    async def send(self, message: Message) -> None:
        try:
            await self._write_answer(message)
        except BaseException:
            self.answered.set()  # the peer is gone, or the app was cancelled: none will follow
            raise

    async def _write_answer(self, message: Message) -> None:
        http, writer = self.http, self.writer
        if message["type"] == "http.response.start":
            headers = [(bytes(k), bytes(v)) for k, v in message.get("headers", [])]
            if http.their_state is not h11.DONE:
                # Answered before its body was read (404, 401...): the rest of the body is not
                # waited for, so the client must not send another request here.
                headers.append((b"connection", b"close"))
            self.started = True
            status = int(message["status"])
            answer = h11.Response(status_code=status, headers=headers, reason=phrase(status))
            await self.write(writer, http.send(answer))
        elif message["type"] == "http.response.body":
            body = message.get("body", b"")
            if body:
                await self.write(writer, http.send(h11.Data(data=body)))
            if not message.get("more_body", False):
                await self.write(writer, http.send(h11.EndOfMessage()))
                self.finished = True
                self.answered.set()


_BUSY_BODY = b'{"error": "server is busy"}'
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
    b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(_BUSY_BODY), _BUSY_BODY)
)


def phrase(status: int) -> bytes:
    """The status line's reason phrase (``401 Unauthorized``): h11 sends none unless given one,
    and a bare ``HTTP/1.1 401`` reads as a broken server in curl and logs."""
    try:
        return HTTPStatus(status).phrase.encode()
    except ValueError:
        return b""


_REASONS = {
    400: b"bad request",
    408: b"request timeout",
    413: b"payload too large",
    431: b"request header fields too large",
    500: b"internal error",
    503: b"server is busy",
}


def _content_length(request: h11.Request) -> int | None:
    for name, value in request.headers:
        if name == b"content-length":
            return int(value)  # h11 has checked it is digits
    return None


def bind(listen: str, *, key: str) -> socket.socket:
    """A socket bound to ``host:port`` (``[v6]:port`` too); port 0 picks a free one.

    ``key`` names the setting in errors. Binding early, before the daemon starts anything,
    makes a port in use stop the daemon with its reason.
    """
    from rungar.errors import ConfigError

    host, _, port = listen.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, int(port)), family=family, backlog=4096)
    except (OSError, ValueError) as e:
        raise ConfigError([f"{key}: cannot listen on {listen}: {e}"]) from e


def engine_caller(loop: asyncio.AbstractEventLoop) -> Callable[[Callable[[], None]], None]:
    """A function that runs a callback on the engine's ``loop`` from a listener's thread."""

    def call(callback: Callable[[], None]) -> None:
        loop.call_soon_threadsafe(callback)

    return call
