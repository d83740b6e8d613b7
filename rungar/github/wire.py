"""The JSON shapes of the scale-set protocol, parsed into frozen values (docs/github.md).

Parsing is tolerant where GitHub is known to be sloppy: unknown fields are ignored, numbers may be
missing, timestamps may be the zero value, ``runnerRequestId`` may be 0 (GARM PR #459), and a
message ``body`` is a *string* holding a JSON array that may be empty.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

BOM = b"\xef\xbb\xbf"
JOB_MESSAGES = "RunnerScaleSetJobMessages"


def decode_json(body: bytes) -> Any:
    """Decode a response body, dropping the UTF-8 BOM the Actions service sometimes sends."""
    if body.startswith(BOM):
        body = body[len(BOM) :]
    if not body.strip():
        return None
    return json.loads(body)


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))


_FRACTION = re.compile(r"(\.\d{6})\d+")


def timestamp(value: Any) -> float:
    """An RFC 3339 time as epoch seconds; 0 for the zero value ``0001-01-01T00:00:00Z``,
    for anything before 1970 and for what cannot be read (.NET sends seven fraction digits)."""
    if not isinstance(value, str) or not value:
        return 0.0
    text = _FRACTION.sub(r"\1", value.strip()).replace("Z", "+00:00").replace("z", "+00:00")
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return 0.0
    if when.tzinfo is None or when.year < 1970:
        return 0.0
    return when.timestamp()


@dataclass(frozen=True, slots=True)
class Statistics:
    """The scale set's counters as GitHub reports them; ``assigned`` drives scaling."""

    available: int = 0
    acquired: int = 0
    assigned: int = 0
    running: int = 0
    registered: int = 0
    busy: int = 0
    idle: int = 0

    @classmethod
    def from_json(cls, raw: Any) -> Statistics:
        d: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        return cls(
            available=_int(d.get("totalAvailableJobs")),
            acquired=_int(d.get("totalAcquiredJobs")),
            assigned=_int(d.get("totalAssignedJobs")),
            running=_int(d.get("totalRunningJobs")),
            registered=_int(d.get("totalRegisteredRunners")),
            busy=_int(d.get("totalBusyRunners")),
            idle=_int(d.get("totalIdleRunners")),
        )

    def to_json(self) -> dict[str, int]:
        return {
            "totalAvailableJobs": self.available,
            "totalAcquiredJobs": self.acquired,
            "totalAssignedJobs": self.assigned,
            "totalRunningJobs": self.running,
            "totalRegisteredRunners": self.registered,
            "totalBusyRunners": self.busy,
            "totalIdleRunners": self.idle,
        }


@dataclass(frozen=True, slots=True)
class RunnerGroup:
    id: int
    name: str
    is_default: bool = False

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> RunnerGroup:
        return cls(_int(d.get("id")), _str(d.get("name")), bool(d.get("isDefaultGroup")))


def label_names(raw: Any) -> tuple[str, ...]:
    if not isinstance(raw, list):
        return ()
    names = (_str(x.get("name")) if isinstance(x, Mapping) else _str(x) for x in raw)
    return tuple(n for n in names if n)


@dataclass(frozen=True, slots=True)
class ScaleSet:
    id: int
    name: str
    runner_group_id: int
    runner_group_name: str = ""
    labels: tuple[str, ...] = ()
    statistics: Statistics | None = None
    enabled: bool = True

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ScaleSet:
        stats = d.get("statistics")
        return cls(
            id=_int(d.get("id")),
            name=_str(d.get("name")),
            runner_group_id=_int(d.get("runnerGroupId")),
            runner_group_name=_str(d.get("runnerGroupName")),
            labels=label_names(d.get("labels")),
            statistics=Statistics.from_json(stats) if isinstance(stats, Mapping) else None,
            enabled=d.get("enabled") is not False,
        )


def scale_set_labels(name: str, extra: tuple[str, ...] | list[str]) -> list[dict[str, str]]:
    """The create body's labels: the name first, extras de-duplicated, type System."""
    seen = {name.lower()}
    out = [{"name": name, "type": "System"}]
    for label in extra:
        if label.lower() not in seen:
            seen.add(label.lower())
            out.append({"name": label, "type": "System"})
    return out


@dataclass(frozen=True, slots=True)
class Session:
    session_id: str
    owner_name: str
    message_queue_url: str
    message_queue_token: str = field(repr=False)  # a secret
    statistics: Statistics | None  # None: the answer came without its statistics block
    scale_set: ScaleSet | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Session:
        scale_set = d.get("runnerScaleSet")
        return cls(
            session_id=_str(d.get("sessionId")),
            owner_name=_str(d.get("ownerName")),
            message_queue_url=_str(d.get("messageQueueUrl")),
            message_queue_token=_str(d.get("messageQueueAccessToken")),
            statistics=(
                Statistics.from_json(stats)
                if isinstance(stats := d.get("statistics"), Mapping)
                else None
            ),
            scale_set=ScaleSet.from_json(scale_set) if isinstance(scale_set, Mapping) else None,
        )


@dataclass(frozen=True, slots=True)
class JobMessage:
    """One element of a message body. ``kind`` is the inner ``messageType``."""

    kind: str
    job_id: str
    runner_request_id: int = 0
    repository: str = ""
    owner: str = ""
    workflow_ref: str = ""
    display_name: str = ""
    workflow_run_id: int = 0
    event_name: str = ""
    labels: tuple[str, ...] = ()
    runner_id: int = 0
    runner_name: str = ""
    result: str = ""
    acquire_job_url: str = ""
    # epoch seconds; 0 when GitHub sent the zero value (the step has not happened)
    queue_time: float = 0.0
    scale_set_assign_time: float = 0.0
    runner_assign_time: float = 0.0
    finish_time: float = 0.0

    @property
    def key(self) -> str:
        """Jobs are keyed by ``jobId``; ``runnerRequestId`` only when the broker left it empty."""
        return self.job_id or f"request:{self.runner_request_id}"

    @property
    def workflow(self) -> str:
        """The workflow file within its repository (``.github/workflows/ci.yml``), from
        ``jobWorkflowRef`` (``owner/repo/.github/workflows/ci.yml@refs/heads/main``): the same
        for every branch, so a job is known by it across branches."""
        path = self.workflow_ref.split("@", 1)[0]
        repository = f"{self.owner}/{self.repository}" if self.owner else self.repository
        if repository and path.startswith(repository + "/"):
            return path[len(repository) + 1 :]
        return path

    @property
    def branch(self) -> str:
        """The branch of the workflow's ref (``main``); another ref as it is; empty without."""
        ref = self.workflow_ref.split("@", 1)[1] if "@" in self.workflow_ref else ""
        return ref.removeprefix("refs/heads/")

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> JobMessage:
        labels = d.get("requestLabels")
        return cls(
            kind=_str(d.get("messageType")),
            job_id=_str(d.get("jobId")),
            runner_request_id=_int(d.get("runnerRequestId")),
            repository=_str(d.get("repositoryName")),
            owner=_str(d.get("ownerName")),
            workflow_ref=_str(d.get("jobWorkflowRef")),
            display_name=_str(d.get("jobDisplayName")),
            workflow_run_id=_int(d.get("workflowRunId")),
            event_name=_str(d.get("eventName")),
            labels=tuple(_str(x) for x in labels) if isinstance(labels, list) else (),
            runner_id=_int(d.get("runnerId")),
            runner_name=_str(d.get("runnerName")),
            result=_str(d.get("result")),
            acquire_job_url=_str(d.get("acquireJobUrl")),
            queue_time=timestamp(d.get("queueTime")),
            scale_set_assign_time=timestamp(d.get("scaleSetAssignTime")),
            runner_assign_time=timestamp(d.get("runnerAssignTime")),
            finish_time=timestamp(d.get("finishTime")),
        )


@dataclass(frozen=True, slots=True)
class Message:
    message_id: int
    message_type: str
    statistics: Statistics | None  # None: the message came without its statistics block
    jobs: tuple[JobMessage, ...]

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Message:
        body = d.get("body")
        jobs: tuple[JobMessage, ...] = ()
        if isinstance(body, str) and body.strip():
            try:
                decoded = json.loads(body)
            except ValueError:
                decoded = None
            if isinstance(decoded, list):
                jobs = tuple(JobMessage.from_json(x) for x in decoded if isinstance(x, Mapping))
        return cls(
            message_id=_int(d.get("messageId")),
            message_type=_str(d.get("messageType")),
            statistics=(
                Statistics.from_json(stats)
                if isinstance(stats := d.get("statistics"), Mapping)
                else None
            ),
            jobs=jobs,
        )


@dataclass(frozen=True, slots=True)
class RunnerReference:
    id: int
    name: str
    scale_set_id: int = 0
    status: str = ""  # "online" or "offline"
    busy: bool = False
    labels: tuple[str, ...] = ()

    @property
    def online(self) -> bool:
        return self.status.lower() == "online"

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> RunnerReference:
        return cls(
            id=_int(d.get("id")),
            name=_str(d.get("name")),
            scale_set_id=_int(d.get("runnerScaleSetId")),
            status=_str(d.get("status")),
            busy=bool(d.get("busy")),
            labels=label_names(d.get("labels")),
        )


@dataclass(frozen=True, slots=True)
class JitConfig:
    runner: RunnerReference
    encoded: str = field(repr=False)  # a secret, single use

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> JitConfig:
        runner = d.get("runner")
        encoded = d.get("encodedJITConfig") or d.get("encoded_jit_config")
        return cls(
            RunnerReference.from_json(runner if isinstance(runner, Mapping) else {}),
            _str(encoded),
        )


def list_answer(raw: Any) -> tuple[int, list[Mapping[str, Any]]]:
    """How many items a ``{count, value}`` answer says it holds, and those it carries.

    The count is the larger of ``count`` and the values' length, so an answer that says it
    found two but carries one is still read as two."""
    values = list_values(raw)
    count = _int(raw.get("count")) if isinstance(raw, Mapping) else 0
    return max(count, len(values)), values


def list_values(raw: Any) -> list[Mapping[str, Any]]:
    """The ``value`` of a ``{count, value}`` envelope; 204/empty means an empty list."""
    if not isinstance(raw, Mapping):
        return []
    values = raw.get("value")
    return [v for v in values if isinstance(v, Mapping)] if isinstance(values, list) else []
