"""A loopback TCP proxy whose faults a test switches at run time: put it between ``rungar serve``
and something it talks to (a ``runnerd serve`` host's TCP listener, the GitHub emulator), point
the daemon at the proxy's address, and break the link while connections are open.

Modes (:class:`Mode`), switched with :meth:`FaultProxy.set_mode` at any time:

- ``PASS``: bytes flow both ways as they come.
- ``BLACKHOLE``: a partition. Connections, old and new, stay open, and nothing is forwarded
  either way: what is read is held, and flows once the mode changes, as TCP delivers what it
  retransmitted once a partition heals. A new connection reaches the target only then.
- ``DELAY``: every chunk waits ``delay`` seconds before it is forwarded (order kept).
- ``RESET``: every open connection, and every new one, is reset (``SO_LINGER`` 0: an RST, not
  a FIN), on both sides.
- ``DRIP``: ``drip_bytes`` at a time, one piece every ``drip_every`` seconds.

::

    proxy = FaultProxy("127.0.0.1", target_port)
    await proxy.start()               # proxy.address is "127.0.0.1:<port>"
    proxy.set_mode(Mode.BLACKHOLE)    # partition
    proxy.set_mode(Mode.PASS)         # heal
    await proxy.stop()                # every connection closed

The proxy runs on the caller's event loop; :meth:`set_mode` must be called from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from dataclasses import dataclass, field
from enum import Enum

CHUNK = 64 * 1024


class Mode(Enum):
    PASS = "pass"  # noqa: S105  # a mode's name, not a password
    BLACKHOLE = "blackhole"
    DELAY = "delay"
    RESET = "reset"
    DRIP = "drip"


def reset_transport(writer: asyncio.StreamWriter) -> None:
    """Close with an RST: linger 0, then abort (no FIN, nothing flushed)."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


@dataclass
class ProxyCounts:
    """What went through the proxy since it started."""

    accepted: int = 0  # connections accepted from clients
    reset: int = 0  # connections reset (open ones at the switch, and new ones while resetting)
    to_target: int = 0  # bytes forwarded client → target
    to_client: int = 0  # bytes forwarded target → client
    held: int = 0  # bytes read from one side and not yet forwarded to the other (either way)


@dataclass(eq=False)  # kept in a set, by identity
class _Connection:
    client: asyncio.StreamWriter
    target: asyncio.StreamWriter | None = None
    pumps: list[asyncio.Task[None]] = field(default_factory=list)

    def reset(self) -> None:
        reset_transport(self.client)
        if self.target is not None:
            reset_transport(self.target)
        for pump in self.pumps:
            pump.cancel()


class FaultProxy:
    """Forwards ``listen_host:listen_port`` (a free port by default) to ``target_host:target_port``
    with the fault of the moment (:class:`Mode`)."""

    def __init__(
        self,
        target_host: str,
        target_port: int,
        *,
        listen_host: str = "127.0.0.1",
        listen_port: int = 0,
        delay: float = 0.5,
        drip_bytes: int = 1,
        drip_every: float = 0.05,
    ) -> None:
        self.target = (target_host, target_port)
        self.listen = (listen_host, listen_port)
        self.delay = delay
        self.drip_bytes = drip_bytes
        self.drip_every = drip_every
        self.mode = Mode.PASS
        self.counts = ProxyCounts()
        self._flowing = asyncio.Event()  # set unless BLACKHOLE
        self._flowing.set()
        self._server: asyncio.Server | None = None
        self._connections: set[_Connection] = set()
        self._handlers: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        assert self._server is not None, "start() the proxy first"
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    @property
    def address(self) -> str:
        """``host:port`` to give the client instead of the target's."""
        return f"{self.listen[0]}:{self.port}"

    @property
    def open_connections(self) -> int:
        return len(self._connections)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, *self.listen)

    def set_mode(
        self,
        mode: Mode,
        *,
        delay: float | None = None,
        drip_bytes: int | None = None,
        drip_every: float | None = None,
    ) -> None:
        """Switch to ``mode`` now, for open connections as for new ones."""
        self.delay = self.delay if delay is None else delay
        self.drip_bytes = self.drip_bytes if drip_bytes is None else drip_bytes
        self.drip_every = self.drip_every if drip_every is None else drip_every
        self.mode = mode
        if mode is Mode.BLACKHOLE:
            self._flowing.clear()
        else:
            self._flowing.set()
        if mode is Mode.RESET:
            for connection in list(self._connections):
                self._reset(connection)

    async def stop(self) -> None:
        """Stop listening and close every connection (reset) and task."""
        if self._server is not None:
            self._server.close()
        for connection in list(self._connections):
            connection.reset()
        self._connections.clear()
        for handler in list(self._handlers):
            handler.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    def _reset(self, connection: _Connection) -> None:
        self.counts.reset += 1
        connection.reset()
        self._connections.discard(connection)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.counts.accepted += 1
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        connection = _Connection(writer)
        self._connections.add(connection)
        try:
            # Stopped or cut: the connection ends here either way, as below.
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await self._serve(connection, reader)
        finally:
            self._handlers.discard(task)
            if connection in self._connections:
                self._connections.discard(connection)
                writer.transport.abort()
                if connection.target is not None:
                    connection.target.transport.abort()

    async def _serve(self, connection: _Connection, client: asyncio.StreamReader) -> None:
        if self.mode is Mode.RESET:
            self._reset(connection)
            return
        await self._flowing.wait()  # a connection made in a partition reaches nothing yet
        if connection not in self._connections:  # reset (or stopped) while it waited
            return
        try:
            target_reader, connection.target = await asyncio.open_connection(*self.target)
        except OSError:
            reset_transport(connection.client)  # as a refused connection looks to the client
            return
        connection.pumps = [
            asyncio.create_task(self._pump(client, connection.target, "to_target")),
            asyncio.create_task(self._pump(target_reader, connection.client, "to_client")),
        ]
        await asyncio.gather(*connection.pumps, return_exceptions=True)

    async def _pump(
        self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, direction: str
    ) -> None:
        try:
            while chunk := await source.read(CHUNK):
                await self._forward(chunk, sink, direction)
            await self._flowing.wait()  # the end of the stream is held like its bytes
            if sink.can_write_eof():
                sink.write_eof()
        except (ConnectionError, OSError):
            sink.transport.abort()

    async def _forward(self, chunk: bytes, sink: asyncio.StreamWriter, direction: str) -> None:
        self.counts.held += len(chunk)
        try:
            while chunk:
                await self._flowing.wait()
                if self.mode is Mode.DELAY:
                    await asyncio.sleep(self.delay)
                    await self._flowing.wait()  # a partition that began meanwhile holds it too
                size = self.drip_bytes if self.mode is Mode.DRIP else len(chunk)
                piece, chunk = chunk[:size], chunk[size:]
                self.counts.held -= len(piece)
                sink.write(piece)
                setattr(self.counts, direction, getattr(self.counts, direction) + len(piece))
                await sink.drain()
                if self.mode is Mode.DRIP and chunk:
                    await asyncio.sleep(self.drip_every)
        finally:
            self.counts.held -= len(chunk)  # what a reset connection never forwarded
