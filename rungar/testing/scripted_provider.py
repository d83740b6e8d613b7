"""A provider seen from its own side: a gRPC server written against the proto alone.

Unlike :class:`rungar.testing.fake_provider.FakeProvider` served by the server kit, this one
implements ``ProviderServicer`` directly, so a test sees exactly what reached the wire: every
call in order, with the deadline the caller set (the gRPC context's time remaining when the
call arrived). Its answers are scripted: each call kind can answer, refuse to answer
(``UNAVAILABLE``, as a provider that does not answer), or wait for a gate the test opens. The
server can be stopped and started again on the same unix socket, as a restarted provider is.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import grpc
import grpc.aio

from rungar.rpc._gen.rungar.provider.v1 import provider_pb2 as pb
from rungar.rpc._gen.rungar.provider.v1 import provider_pb2_grpc as pb_grpc

CALLS = ("Info", "ValidateRunner", "Create", "Delete", "List", "UpdateRunner")


@dataclass(frozen=True, slots=True)
class Received:
    """One call as the provider received it."""

    call: str
    name: str  # the runner or machine named, if any
    deadline: float | None  # seconds the caller gave it, as seen on arrival; None: no deadline
    request_id: str = ""


@dataclass
class Script:
    """How the provider answers; the test changes it between steps."""

    # call kind -> how many of its next calls get no answer (UNAVAILABLE); None: all of them
    silent: dict[str, int | None] = field(default_factory=dict)
    gates: dict[str, asyncio.Event] = field(default_factory=dict)  # call kinds held until set

    def go_silent(self, *calls: str, times: int | None = None) -> None:
        for call in calls:
            self.silent[call] = times

    def answer(self) -> None:
        """Answer every call again."""
        self.silent.clear()

    def unanswered(self, call: str) -> bool:
        if call not in self.silent:
            return False
        left = self.silent[call]
        if left is not None:
            if left <= 1:
                del self.silent[call]
            else:
                self.silent[call] = left - 1
        return True


class ScriptedProvider(pb_grpc.ProviderServicer):  # type: ignore[misc]  # generated base
    """Creates every machine asked for, lists them, deletes them; records every call."""

    def __init__(self, name: str, address: str) -> None:
        self.name = name
        self.address = address
        self.script = Script()
        self.received: list[Received] = []
        self.machines: dict[str, pb.Machine] = {}
        self.in_flight: dict[str, int] = dict.fromkeys(CALLS, 0)
        self.most_in_flight: dict[str, int] = dict.fromkeys(CALLS, 0)
        self._server: grpc.aio.Server | None = None

    # ------------------------------------------------------------------ the server

    async def start(self) -> None:
        server = grpc.aio.server()
        pb_grpc.add_ProviderServicer_to_server(self, server)
        server.add_insecure_port(self.address)
        await server.start()
        self._server = server

    async def stop(self) -> None:
        """Stop answering at once, as a provider whose process ended."""
        if self._server is not None:
            await self._server.stop(None)
            self._server = None

    # ------------------------------------------------------------------ what it saw

    def calls(self, call: str) -> list[Received]:
        return [r for r in self.received if r.call == call]

    def stop_machine(self, name: str) -> None:
        """The machine ended by itself (its runner exited): List shows it STOPPED."""
        self.machines[name].state = pb.Machine.STOPPED

    async def _enter(self, call: str, name: str, context: Any, request_id: str = "") -> None:
        remaining = context.time_remaining()
        self.received.append(Received(call, name, remaining, request_id))
        self.in_flight[call] += 1
        self.most_in_flight[call] = max(self.most_in_flight[call], self.in_flight[call])
        try:
            gate = self.script.gates.get(call)
            if gate is not None:
                await gate.wait()
            if self.script.unanswered(call):
                await context.abort(grpc.StatusCode.UNAVAILABLE, f"{self.name} is not answering")
        finally:
            self.in_flight[call] -= 1

    # ------------------------------------------------------------------ the protocol

    async def Info(self, request: Any, context: Any) -> Any:
        await self._enter("Info", "", context)
        return pb.InfoResponse(name=self.name, kind="scripted", version="1")

    async def ValidateRunner(self, request: Any, context: Any) -> Any:
        await self._enter("ValidateRunner", "", context)
        return pb.ValidateRunnerResponse()

    async def Create(self, request: Any, context: Any) -> Any:
        await self._enter("Create", request.runner_name, context, request.request_id)
        machine = self.machines.get(request.runner_name)
        if machine is None:
            machine = pb.Machine(
                name=request.runner_name, state=pb.Machine.RUNNING, labels=dict(request.labels)
            )
            self.machines[request.runner_name] = machine
        return pb.CreateResponse(created=pb.Created(machine=machine))

    async def Delete(self, request: Any, context: Any) -> Any:
        await self._enter("Delete", request.name, context)
        self.machines.pop(request.name, None)
        return pb.DeleteResponse()

    async def List(self, request: Any, context: Any) -> Any:
        await self._enter("List", "", context)
        selector = dict(request.selector)
        found = [
            m
            for m in self.machines.values()
            if all(m.labels.get(k) == v for k, v in selector.items())
        ]
        return pb.ListResponse(machines=found)

    async def UpdateRunner(self, request: Any, context: Any) -> Any:
        await self._enter("UpdateRunner", request.runner_name, context)
        return pb.UpdateRunnerResponse()
