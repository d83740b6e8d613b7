"""Model values <-> ``rungar.provider.v1`` messages (ARCHITECTURE §2, STYLE "Types").

Protobuf messages never travel past ``rungar/rpc/``: the client converts answers into
:mod:`rungar.model` values and the server converts requests back, here and only here.
Conversions are total: an unknown enum number from a newer peer falls back to the safe
meaning the proto documents (an unspecified refusal kind is FAILED, an unspecified state is
STARTING), never to an exception.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from google.protobuf import struct_pb2, timestamp_pb2
from google.protobuf.json_format import MessageToDict

from rungar.model.machine import (
    Created,
    CreateRequest,
    JobHint,
    Machine,
    MachineState,
    ProviderInfo,
    Refusal,
    RefusalKind,
)
from rungar.model.runner_block import RunnerBlock
from rungar.rpc._gen.rungar.provider.v1 import provider_pb2 as pb

_KIND_TO_PB = {
    RefusalKind.FULL: pb.Refused.FULL,
    RefusalKind.INVALID: pb.Refused.INVALID,
    RefusalKind.FAILED: pb.Refused.FAILED,
}
_KIND_FROM_PB = {int(v): k for k, v in _KIND_TO_PB.items()}
_STATE_TO_PB = {
    MachineState.STARTING: pb.Machine.STARTING,
    MachineState.RUNNING: pb.Machine.RUNNING,
    MachineState.STOPPED: pb.Machine.STOPPED,
}
_STATE_FROM_PB = {int(v): k for k, v in _STATE_TO_PB.items()}


def timestamp_to_pb(seconds: float) -> Any:
    """Epoch seconds as a Timestamp; 0 (the model's "unset") stays unset (``None``)."""
    if seconds <= 0 or not math.isfinite(seconds):
        return None
    whole = math.floor(seconds)
    return timestamp_pb2.Timestamp(seconds=whole, nanos=round((seconds - whole) * 1e9) % 10**9)


def timestamp_from_pb(message: Any, present: bool) -> float:
    if not present:
        return 0.0
    return float(message.seconds) + float(message.nanos) / 1e9


def _struct_to_dict(message: Any) -> dict[str, Any]:
    # json_format gives plain Python values; Struct numbers are doubles, so whole numbers that
    # were ints in the YAML come back as floats: restore them, a provider may compare to ints.
    raw: dict[str, Any] = MessageToDict(message)
    return {k: _whole_numbers_as_ints(v) for k, v in raw.items()}


def _whole_numbers_as_ints(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: _whole_numbers_as_ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole_numbers_as_ints(v) for v in value]
    return value


def runner_to_pb(runner: RunnerBlock) -> Any:
    extra = struct_pb2.Struct()
    extra.update(_jsonable(dict(runner.extra)))
    return pb.RunnerSpec(
        vcpus=runner.vcpus,
        memory_bytes=runner.memory_bytes,
        disk_bytes=runner.disk_bytes,
        image=runner.image,
        extra=extra,
    )


def _jsonable(value: Any) -> Any:
    """Struct holds JSON values only: tuples become lists, other scalars their text."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def runner_from_pb(message: Any) -> RunnerBlock:
    return RunnerBlock(
        vcpus=float(message.vcpus),
        memory_bytes=int(message.memory_bytes),
        disk_bytes=int(message.disk_bytes),
        image=str(message.image),
        extra=_struct_to_dict(message.extra),
    )


def hint_to_pb(hint: JobHint) -> Any:
    return pb.JobHint(
        repository=hint.repository, workflow=hint.workflow, job=hint.job, job_id=hint.job_id
    )


def hint_from_pb(message: Any) -> JobHint:
    return JobHint(
        repository=str(message.repository),
        workflow=str(message.workflow),
        job=str(message.job),
        job_id=str(message.job_id),
    )


def create_request_to_pb(request: CreateRequest) -> Any:
    message = pb.CreateRequest(
        runner_name=request.runner_name,
        request_id=request.request_id,
        scale_set=request.scale_set,
        labels=dict(request.labels),
        runner=runner_to_pb(request.runner),
        jit_config=request.jit_config,
        hints=[hint_to_pb(h) for h in request.job_hints],
    )
    deadline = timestamp_to_pb(request.deadline)
    if deadline is not None:
        message.deadline.CopyFrom(deadline)
    return message


def create_request_from_pb(message: Any) -> CreateRequest:
    return CreateRequest(
        runner_name=str(message.runner_name),
        request_id=str(message.request_id),
        scale_set=str(message.scale_set),
        labels=dict(message.labels),
        runner=runner_from_pb(message.runner),
        jit_config=str(message.jit_config),
        job_hints=tuple(hint_from_pb(h) for h in message.hints),
        deadline=timestamp_from_pb(message.deadline, message.HasField("deadline")),
    )


def machine_to_pb(machine: Machine) -> Any:
    message = pb.Machine(
        name=machine.name,
        state=_STATE_TO_PB[machine.state],
        labels=dict(machine.labels),
        size=machine.size,
    )
    created_at = timestamp_to_pb(machine.created_at)
    if created_at is not None:
        message.created_at.CopyFrom(created_at)
    return message


def machine_from_pb(message: Any, provider: str = "") -> Machine:
    return Machine(
        name=str(message.name),
        state=_STATE_FROM_PB.get(int(message.state), MachineState.STARTING),
        labels=dict(message.labels),
        size=str(message.size),
        created_at=timestamp_from_pb(message.created_at, message.HasField("created_at")),
        provider=provider,
    )


def create_response_to_pb(outcome: Created | Refusal) -> Any:
    if isinstance(outcome, Created):
        return pb.CreateResponse(created=pb.Created(machine=machine_to_pb(outcome.machine)))
    return pb.CreateResponse(
        refused=pb.Refused(
            kind=_KIND_TO_PB[outcome.kind], resource=outcome.resource, message=outcome.message
        )
    )


def create_response_from_pb(message: Any, provider: str = "") -> Created | Refusal:
    """The answer as a value. A response with neither branch set is a broken provider: FAILED."""
    which = message.WhichOneof("outcome")
    if which == "created":
        return Created(machine_from_pb(message.created.machine, provider))
    if which == "refused":
        refused = message.refused
        kind = _KIND_FROM_PB.get(int(refused.kind), RefusalKind.FAILED)
        text = str(refused.message) or f"refused ({kind.value}) without a message"
        return Refusal(kind=kind, message=text, resource=str(refused.resource))
    return Refusal(RefusalKind.FAILED, "the provider answered Create with neither outcome")


def info_to_pb(info: ProviderInfo) -> Any:
    return pb.InfoResponse(
        name=info.name, kind=info.kind, version=info.version, capabilities=info.capabilities
    )


def info_from_pb(message: Any) -> ProviderInfo:
    return ProviderInfo(
        name=str(message.name),
        kind=str(message.kind),
        version=str(message.version),
        capabilities=tuple(str(c) for c in message.capabilities),
    )
