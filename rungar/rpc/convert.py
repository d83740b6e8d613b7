"""Model values <-> ``rungar.provider.v1`` messages (proto/rungar/provider/v1/provider.proto).

Protobuf messages never travel past ``rungar/rpc/``: the client converts answers into
:mod:`rungar.model` values and the server converts requests back, here and only here.
Conversions are total: an unknown enum number from a newer peer falls back to the safe
meaning the proto documents (an unspecified refusal kind is FAILED, an unspecified state is
STARTING), never to an exception. What a provider answers is bounded here, before anything
stores, logs or shows it (:mod:`rungar.model.bounded`): texts cut to their documented length,
a refusal's resource kept only when it is one lowercase word, its expected room only when it
is within bounds (:func:`rungar.model.bounded.believed_room`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from google.protobuf import struct_pb2

from rungar.model import bounded
from rungar.model.machine import (
    Conclusion,
    Created,
    CreateRequest,
    JobHint,
    Machine,
    MachineState,
    ProviderInfo,
    Refusal,
    RefusalKind,
    Removal,
    RoomExpected,
)
from rungar.model.runner import RemovalReason
from rungar.model.runner_block import RunnerBlock
from rungar.model.runner_version import parse_runner_version
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
_REASON_TO_PB = {
    RemovalReason.JOB_COMPLETED: pb.Removal.JOB_COMPLETED,
    RemovalReason.SCALED_DOWN: pb.Removal.SCALED_DOWN,
    RemovalReason.IDLE_TOO_LONG: pb.Removal.IDLE_TOO_LONG,
    RemovalReason.NEVER_CONNECTED: pb.Removal.NEVER_CONNECTED,
    RemovalReason.EXPIRED: pb.Removal.EXPIRED,
    RemovalReason.SCALE_SET_REMOVED: pb.Removal.SCALE_SET_REMOVED,
    RemovalReason.DRAINED: pb.Removal.DRAINED,
    RemovalReason.REQUESTED: pb.Removal.REQUESTED,
    RemovalReason.OUTDATED: pb.Removal.OUTDATED,
    RemovalReason.UNREGISTERED: pb.Removal.UNREGISTERED,
    RemovalReason.DISCONNECTED: pb.Removal.DISCONNECTED,
    RemovalReason.STUCK: pb.Removal.STUCK,
    RemovalReason.ENDED: pb.Removal.ENDED,
    RemovalReason.NOT_PLACED: pb.Removal.NOT_PLACED,
}
_REASON_FROM_PB = {int(v): k for k, v in _REASON_TO_PB.items()}
_CONCLUSION_TO_PB = {
    Conclusion.SUCCEEDED: pb.Removal.SUCCEEDED,
    Conclusion.FAILED: pb.Removal.FAILED,
    Conclusion.CANCELLED: pb.Removal.CANCELLED,
    Conclusion.TIMED_OUT: pb.Removal.TIMED_OUT,
}
_CONCLUSION_FROM_PB = {int(v): k for k, v in _CONCLUSION_TO_PB.items()}


def _set_timestamp(target: Any, seconds: float) -> None:
    """Fill a Timestamp field in place; 0 (the model's "unset") leaves it unset."""
    if seconds <= 0 or not math.isfinite(seconds):
        return
    whole = math.floor(seconds)
    target.seconds = whole
    target.nanos = round((seconds - whole) * 1e9) % 10**9
    target.SetInParent()  # present even when it rounds to the epoch itself (both fields 0)


def timestamp_from_pb(message: Any, present: bool) -> float:
    if not present:
        return 0.0
    return float(message.seconds) + float(message.nanos) / 1e9


# Every call carries these conversions both ways, so they are written for speed: messages are
# filled in place (a sub-message passed to a constructor is copied), map fields are read key by
# key (several times faster than dict() on upb maps), and Struct values are walked directly
# rather than through json_format, which builds and then re-walks a JSON tree.


def _labels(field: Any) -> dict[str, str]:
    return {key: field[key] for key in field}


def _fill_labels(target: Any, labels: Mapping[str, str]) -> None:
    for key, value in labels.items():  # faster than update(), which upb does in Python
        target[key] = value


def _struct_to_dict(message: Any) -> dict[str, Any]:
    fields = message.fields
    return {key: _value_from_pb(fields[key]) for key in fields}


def _value_from_pb(value: Any) -> Any:
    """A Struct value as plain Python, as JSON would give it.

    Struct numbers are doubles, so whole numbers that were ints in the YAML come back as
    floats: they are restored to ints, as a provider may compare them to ints. Non-finite
    numbers have no JSON form and are refused, as json_format refuses them.
    """
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        return value.string_value
    if kind == "number_value":
        number: float = value.number_value
        if not math.isfinite(number):
            raise ValueError(f"a runner block number is not finite: {number}")
        if number.is_integer() and abs(number) < 2**53:
            return int(number)
        return number
    if kind == "bool_value":
        return value.bool_value
    if kind == "struct_value":
        return _struct_to_dict(value.struct_value)
    if kind == "list_value":
        return [_value_from_pb(v) for v in value.list_value.values]
    return None  # null_value, or no kind at all from a sloppy peer


def _fill_struct(target: Any, mapping: Mapping[Any, Any]) -> None:
    fields = target.fields
    for key, value in mapping.items():
        _set_value(fields[str(key)], value)


def _set_value(target: Any, value: Any) -> None:
    """Struct holds JSON values only: tuples become lists, other scalars their text."""
    if value is None:
        target.null_value = struct_pb2.NULL_VALUE
    elif isinstance(value, bool):
        target.bool_value = value
    elif isinstance(value, int | float):
        target.number_value = value
    elif isinstance(value, str):
        target.string_value = value
    elif isinstance(value, Mapping):
        target.struct_value.SetInParent()  # an empty mapping is still a mapping
        _fill_struct(target.struct_value, value)
    elif isinstance(value, list | tuple):
        target.list_value.SetInParent()
        values = target.list_value.values
        for item in value:
            _set_value(values.add(), item)
    else:
        target.string_value = str(value)


def _fill_runner(target: Any, runner: RunnerBlock) -> None:
    target.vcpus = runner.vcpus
    target.memory_bytes = runner.memory_bytes
    target.disk_bytes = runner.disk_bytes
    target.image = runner.image
    target.extra.SetInParent()
    if runner.extra:
        _fill_struct(target.extra, runner.extra)


def runner_to_pb(runner: RunnerBlock) -> Any:
    message = pb.RunnerSpec()
    _fill_runner(message, runner)
    return message


def runner_from_pb(message: Any) -> RunnerBlock:
    return RunnerBlock(
        vcpus=float(message.vcpus),
        memory_bytes=int(message.memory_bytes),
        disk_bytes=int(message.disk_bytes),
        image=str(message.image),
        extra=_struct_to_dict(message.extra),
    )


def hint_to_pb(hint: JobHint) -> Any:
    message = pb.JobHint(
        repository=hint.repository,
        workflow=hint.workflow,
        job=hint.job,
        job_id=hint.job_id,
        branch=hint.branch,
        run_id=hint.run_id,
    )
    # GitHub's times: each left unset while 0 (the step has not happened, or is not known).
    if hint.queued_at > 0:
        _set_timestamp(message.queued_at, hint.queued_at)
    if hint.started_at > 0:
        _set_timestamp(message.started_at, hint.started_at)
    if hint.completed_at > 0:
        _set_timestamp(message.completed_at, hint.completed_at)
    if hint.clock_offset is not None:
        message.clock_offset = hint.clock_offset
    return message


def hint_from_pb(message: Any) -> JobHint:
    # An unset Timestamp reads as zeros, the model's "unset": no HasField needed.
    queued, started, completed = message.queued_at, message.started_at, message.completed_at
    return JobHint(
        message.repository,
        message.workflow,
        message.job,
        message.job_id,
        message.branch,
        message.run_id,
        queued.seconds + queued.nanos / 1e9,
        started.seconds + started.nanos / 1e9,
        completed.seconds + completed.nanos / 1e9,
        _offset(message),
    )


def _offset(message: Any) -> float | None:
    """A hint's clock offset, untrusted: unset, or not a finite number, reads as not measured."""
    if not message.HasField("clock_offset"):
        return None
    value = float(message.clock_offset)
    return value if math.isfinite(value) else None


class _LastHints:
    """The hints last converted each way, kept for the next call: a burst's Creates (and queue
    updates) carry the same queued jobs, which cost more to convert than all else a Create
    carries. Encoding keeps them serialized (checked by identity of the same JobHint values,
    then equality), decoding keeps the decoded tuple beside its messages (checked by equality
    of the messages, done in C). One entry each way, replaced whole, so it is never stale."""

    def __init__(self) -> None:
        self._encoded: tuple[tuple[JobHint, ...], bytes] = ((), b"")
        self._decoded: tuple[Any, tuple[JobHint, ...]] = (None, ())

    def fill(self, message: Any, hints: tuple[JobHint, ...]) -> None:
        """Append ``hints`` to a CreateRequest's ``hints``, as ``hints.extend`` would."""
        last, encoded = self._encoded
        if hints != last:
            only = pb.CreateRequest()
            only.hints.extend([hint_to_pb(h) for h in hints])
            encoded = only.SerializeToString()
            self._encoded = (hints, encoded)
        message.MergeFromString(encoded)  # a repeated field's entries are appended

    def read(self, field: Any) -> tuple[JobHint, ...]:
        """The JobHints of a repeated JobHint field."""
        last, decoded = self._decoded
        if last is not None and len(last) == len(field) and last == field:
            return decoded
        decoded = tuple(map(hint_from_pb, field))
        self._decoded = (field, decoded)
        return decoded


_last_hints = _LastHints()


def hints_from_pb(field: Any) -> tuple[JobHint, ...]:
    """A repeated JobHint field (a Create's hints, a queue update's queued) as values."""
    return _last_hints.read(field)


def delete_request_to_pb(name: str, removal: Removal | None) -> Any:
    message = pb.DeleteRequest(name=name)
    if removal is not None:
        target = message.removal
        target.reason = _REASON_TO_PB.get(removal.reason, pb.Removal.REASON_UNSPECIFIED)
        if removal.conclusion is not None:
            target.conclusion = _CONCLUSION_TO_PB[removal.conclusion]
        if removal.job is not None:
            target.job.CopyFrom(hint_to_pb(removal.job))
        target.SetInParent()
    return message


def removal_from_pb(message: Any) -> Removal | None:
    """The removal a DeleteRequest carries; None when it carries none or a reason this side
    does not know (a newer Rungar's): the provider then decides alone, as with an older one."""
    if not message.HasField("removal"):
        return None
    removal = message.removal
    reason = _REASON_FROM_PB.get(removal.reason)
    if reason is None:
        return None
    return Removal(
        reason=reason,
        conclusion=_CONCLUSION_FROM_PB.get(removal.conclusion),
        job=hint_from_pb(removal.job) if removal.HasField("job") else None,
    )


def create_request_to_pb(request: CreateRequest) -> Any:
    message = pb.CreateRequest(
        runner_name=request.runner_name,
        request_id=request.request_id,
        scale_set=request.scale_set,
        jit_config=request.jit_config,
    )
    _fill_labels(message.labels, request.labels)
    _fill_runner(message.runner, request.runner)
    if request.job_hints:
        _last_hints.fill(message, request.job_hints)
    if request.deadline > 0:  # reading message.deadline would build a wrapper for nothing
        _set_timestamp(message.deadline, request.deadline)
    return message


def create_request_from_pb(message: Any) -> CreateRequest:
    return CreateRequest(
        runner_name=message.runner_name,
        request_id=message.request_id,
        scale_set=message.scale_set,
        labels=_labels(message.labels),
        runner=runner_from_pb(message.runner),
        jit_config=message.jit_config,
        job_hints=hints_from_pb(message.hints),
        deadline=(
            timestamp_from_pb(message.deadline, True) if message.HasField("deadline") else 0.0
        ),
    )


def _fill_machine(target: Any, machine: Machine) -> None:
    target.name = machine.name
    target.state = _STATE_TO_PB[machine.state]
    _fill_labels(target.labels, machine.labels)
    target.size = machine.size
    if machine.created_at > 0:
        _set_timestamp(target.created_at, machine.created_at)


def machine_to_pb(machine: Machine) -> Any:
    message = pb.Machine()
    _fill_machine(message, machine)
    return message


def machine_from_pb(message: Any, provider: str = "") -> Machine:
    created_at = message.created_at if message.HasField("created_at") else None
    name, size = message.name, message.size
    return Machine(
        # A name past the bound is cut, so it matches no runner of ours (the engine reports
        # a listed name of the wrong form: rungar.engine.reconcile.ownership).
        name=name if len(name) <= bounded.NAME_MAX else bounded.cut(name, bounded.NAME_MAX),
        state=_STATE_FROM_PB.get(message.state, MachineState.STARTING),
        labels=bounded.labels(_labels(message.labels)),
        size=size if len(size) <= bounded.SIZE_MAX else bounded.sentence(size, bounded.SIZE_MAX),
        created_at=0.0 if created_at is None else timestamp_from_pb(created_at, True),
        provider=provider,
    )


def create_response_to_pb(outcome: Created | Refusal) -> Any:
    message = pb.CreateResponse()
    if isinstance(outcome, Created):
        machine = message.created.machine
        machine.SetInParent()  # the oneof says "created" even for a machine of defaults
        _fill_machine(machine, outcome.machine)
        return message
    refused = message.refused
    refused.SetInParent()
    refused.kind = _KIND_TO_PB[outcome.kind]
    refused.resource = outcome.resource
    refused.message = outcome.message
    if outcome.room is not None:
        refused.room_expected.seconds = outcome.room.seconds
        refused.room_expected.confidence = outcome.room.confidence
    return message


def create_response_from_pb(message: Any, provider: str = "") -> Created | Refusal:
    """The answer as a value. A response with neither branch set is a broken provider: FAILED."""
    which = message.WhichOneof("outcome")
    if which == "created":
        return Created(machine_from_pb(message.created.machine, provider))
    if which == "refused":
        refused = message.refused
        kind = _KIND_FROM_PB.get(refused.kind, RefusalKind.FAILED)
        text = bounded.sentence(refused.message) or f"refused ({kind.value}) without a message"
        room = None
        if refused.HasField("room_expected"):
            sent = refused.room_expected
            room = RoomExpected(float(sent.seconds), float(sent.confidence))
        refusal = Refusal(kind, text, bounded.resource(refused.resource), room)
        return bounded.believed_room(refusal)
    return Refusal(RefusalKind.FAILED, "the provider answered Create with neither outcome")


def info_to_pb(info: ProviderInfo) -> Any:
    return pb.InfoResponse(
        name=info.name,
        kind=info.kind,
        version=info.version,
        capabilities=info.capabilities,
        runner_version=info.runner_version,
    )


def info_from_pb(message: Any) -> ProviderInfo:
    def short(text: str) -> str:
        return bounded.sentence(str(text), bounded.NAME_MAX)

    return ProviderInfo(
        name=short(message.name),
        kind=short(message.kind),
        version=short(message.version),
        capabilities=tuple(short(c) for c in message.capabilities[: bounded.LABELS_MAX]),
        runner_version=_runner_version(message.runner_version),
    )


def _runner_version(text: str) -> str:
    """A runner version as the provider said it, when it is one (``2.329.0``, at most
    VERSION_MAX characters); anything else is not known (""), never compared."""
    parsed = parse_runner_version(text)
    return str(parsed) if parsed is not None else ""
