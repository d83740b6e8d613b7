"""A provider that misbehaves on purpose, one named scenario at a time: the faults a plugin can
have (docs/architecture.md, "What Rungar believes of a provider"), for tests of the daemon and
for a plugin author who wants to see how Rungar answers each one.

:class:`HostileProvider` is a :class:`~rungar.testing.fake_provider.FakeProvider` (it creates,
lists and deletes machines as one would) with the scenarios in :data:`SCENARIOS` switched on by
name; serve it with :func:`rungar.rpc.server.serve` to put it behind a real gRPC connection::

    hostile = HostileProvider("b", scenarios={"lists_others", "huge_texts"})
    hostile.others = lambda: healthy.machines  # what "lists_others" lists
    server = await serve(hostile, "unix:///tmp/b.sock")

:class:`GarbageServer` is the fault below the protocol: a peer that answers a valid HTTP/2
preface, then garbage.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import os
import ssl
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from typing import Any

from rungar.model import labels as L
from rungar.model.machine import Created, CreateRequest, Machine, MachineState, Refusal, RefusalKind
from rungar.testing.fake_provider import FakeProvider

HUGE = 200 * 1024  # the size of a hostile text: 200 KB

# Every scenario, with what the provider does; the daemon's answer to each is in
# docs/architecture.md ("What Rungar believes of a provider").
SCENARIOS: dict[str, str] = {
    "lists_others": (
        "List also names another provider's machines (``others``), stopped and without their "
        "provider label"
    ),
    "lists_twice": "List names each of its machines twice: as it is, then stopped",
    "misnames_creates": "Create makes the machine asked for and answers with another's name",
    "huge_texts": (
        "Create refuses FULL with a 200 KB resource and a 200 KB message full of control characters"
    ),
    "other_installation": "List also names a machine with another installation's labels",
    "bad_names": "List also names a machine whose name is 200 KB long",
    "hangs_lists": "List never answers (it waits 10 minutes)",
    "exits_in_create": (
        "Create ends the provider's process (exit code 1) before it answers: served as a plugin, "
        "the daemon restarts it"
    ),
}
HANG = 600.0  # how long "hangs_lists" keeps a List waiting


class HostileProvider(FakeProvider):
    """A fake provider with some of :data:`SCENARIOS` switched on (``scenarios``)."""

    def __init__(self, name: str = "hostile", *, scenarios: Collection[str] = (), **kw: Any):
        unknown = set(scenarios) - set(SCENARIOS)
        if unknown:
            raise ValueError(f"unknown scenarios: {sorted(unknown)}; known: {sorted(SCENARIOS)}")
        super().__init__(name, **kw)
        self.scenarios = set(scenarios)
        self.others: Callable[[], list[Machine]] = list  # what "lists_others" lists
        self.misnamed: list[str] = []  # the names "misnames_creates" answered with
        self.huge_refusals = 0  # the refusals "huge_texts" answered

    async def create(self, request: CreateRequest) -> Created | Refusal:
        if "exits_in_create" in self.scenarios:
            os._exit(1)
        if "huge_texts" in self.scenarios:
            await super().create(request)  # counted; its answer is replaced
            self.delete_now(request.runner_name)
            text = "\n\x1b[2J" + "x" * HUGE
            self.huge_refusals += 1
            return Refusal(RefusalKind.FULL, text, resource="r" * HUGE)
        answer = await super().create(request)
        if "misnames_creates" not in self.scenarios or not isinstance(answer, Created):
            return answer
        other = f"{request.runner_name}-other"
        labels = dict(request.labels) | {L.RUNNER: other}
        made = self.create_now(
            replace(
                request, runner_name=other, request_id=f"{request.request_id}-other", labels=labels
            ),
            self._clock.now(),
        )
        self.misnamed.append(other)
        machine = made.machine if isinstance(made, Created) else answer.machine
        return Created(replace(machine, name=other))

    async def list(self, selector: Mapping[str, str]) -> list[Machine]:
        if "hangs_lists" in self.scenarios:
            await asyncio.sleep(HANG)
        own = await super().list(selector)
        found = list(own)
        if "lists_twice" in self.scenarios:
            found += [replace(m, state=MachineState.STOPPED) for m in own]
        if "lists_others" in self.scenarios:
            found += [
                replace(
                    m,
                    state=MachineState.STOPPED,
                    labels={k: v for k, v in m.labels.items() if k != L.PROVIDER},
                )
                for m in self.others()
            ]
        if "other_installation" in self.scenarios:
            labels = L.machine_labels("another-installation", "linux", "stranger-1", "r")
            found.append(Machine("stranger-1", MachineState.RUNNING, labels))
        if "bad_names" in self.scenarios:
            labels = L.machine_labels(selector.get(L.INSTALLATION, ""), "linux", "long", "r")
            found.append(Machine("n" * HUGE, MachineState.RUNNING, labels))
        return found


# An empty HTTP/2 SETTINGS frame: a valid server preface. What follows it is a frame of a type
# no HTTP/2 peer knows, whose length runs past what is sent: garbage.
SERVER_PREFACE = bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
GARBAGE = b"\x00\x00\x10\xff\x00\x00\x00\x00\x00" + b"not a frame at all"


class GarbageServer:
    """A peer that answers every connection with a valid HTTP/2 preface, then garbage, then
    hangs up: the connection is made, and breaks. With ``preface`` off it answers garbage at
    once: no connection can be made. ``connections`` counts the connections it accepted and
    ``accepted_at`` says when (:meth:`shortest_gap`), so a test sees how often the daemon
    connects again. Listens on ``unix:///path`` or ``127.0.0.1:PORT`` (port 0 picks one;
    :attr:`address` says which), behind TLS when given ``tls`` (a server context offering
    ``h2``, as gRPC asks), on a loop of its own in a thread, so a busy caller's loop never
    delays its answers (a late answer is another fault)."""

    def __init__(
        self, address: str, *, preface: bool = True, tls: ssl.SSLContext | None = None
    ) -> None:
        self.address = address
        self.preface = preface
        self.tls = tls
        self.connections = 0
        self.accepted_at: list[float] = []  # time.monotonic() of each connection accepted
        self._server: asyncio.AbstractServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    async def start(self) -> None:
        ready = threading.Event()
        loop = asyncio.new_event_loop()
        self._loop = loop

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.run_until_complete(self._listen())
            ready.set()
            loop.run_forever()

        self._thread = threading.Thread(target=run, name="garbage-server", daemon=True)
        self._thread.start()
        await asyncio.to_thread(ready.wait)

    async def _listen(self) -> None:
        if self.address.startswith("unix://"):
            path = self.address.removeprefix("unix://")
            self._server = await asyncio.start_unix_server(self._answer, path, ssl=self.tls)
            return
        host, _, port = self.address.rpartition(":")
        self._server = await asyncio.start_server(self._answer, host, int(port), ssl=self.tls)
        bound = self._server.sockets[0].getsockname()
        self.address = f"{bound[0]}:{bound[1]}"

    def shortest_gap(self) -> float:
        """The shortest time between two connections accepted; infinite before the second."""
        times = self.accepted_at
        return min((b - a for a, b in itertools.pairwise(times)), default=math.inf)

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.accepted_at.append(time.monotonic())
        with contextlib.suppress(OSError):
            writer.write((SERVER_PREFACE if self.preface else b"") + GARBAGE)
            await writer.drain()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(reader.read(65_536), 0.2)
        # Hung up at once, without TLS's goodbye (which would wait on the peer's).
        writer.transport.abort()

    async def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        self._loop = self._thread = None

        async def close() -> None:
            if self._server is not None:
                self._server.close()
                await self._server.wait_closed()
                self._server = None

        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(close(), loop))
        loop.call_soon_threadsafe(loop.stop)
        await asyncio.to_thread(thread.join)
        loop.close()
