"""The emulator's records (docs/github-emulator.md).

These are mutable on purpose: they are the emulated service's own state, changed in place by one
event loop, never shared with Rungar's code. Rungar's values stay frozen.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter
from collections.abc import ItemsView, Iterator, MutableMapping, ValuesView
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

ZERO_TIME = "0001-01-01T00:00:00Z"  # what the service sends for a step not yet taken


def rfc3339(ts: float) -> str:
    """An emulated time as the service writes it; the zero value before the step happened."""
    if ts <= 0:
        return ZERO_TIME
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class JobState(StrEnum):
    QUEUED = "queued"
    WAITING = "waiting"  # held by an environment gate
    AVAILABLE = "available"  # offered to a scale set (legacy acquire flow)
    ASSIGNED = "assigned"
    RUNNING = "running"
    COMPLETED = "completed"


@dataclass(slots=True)
class JobSpec:
    """What a test asks for; ``duration``, ``memory_bytes`` and ``cpu`` are the workload."""

    labels: tuple[str, ...] = ("self-hosted",)
    repository: str = "octo-org/app"
    workflow: str = "ci.yml"
    name: str = "build"
    duration: float = 1.0  # emulated seconds
    memory_bytes: int = 0
    cpu: float = 0.0  # cores to keep busy
    result: str = "succeeded"  # what the runner will report
    gated: bool = False
    event_name: str = "push"
    run_id: int = 0  # the workflow run it belongs to; 0: a run of its own


@dataclass(slots=True)
class Job:
    job_id: str
    request_id: int
    workflow_job_id: int
    run_id: int
    spec: JobSpec
    created_at: float
    state: JobState = JobState.QUEUED
    scale_set_id: int = 0
    runner_id: int = 0
    runner_name: str = ""
    result: str = ""
    assigned_at: float = 0.0
    started_at: float = 0.0
    finished_at: float = 0.0
    reassignments: int = 0
    attempt: int = 1  # a re-run is the run's next attempt of the job
    rerun_by: str = ""  # the job id of its re-run, once re-run (then it is not the latest)

    @property
    def owner(self) -> str:
        return self.spec.repository.split("/", 1)[0]

    @property
    def repo_name(self) -> str:
        return self.spec.repository.split("/", 1)[-1]

    def event(self, kind: str, **extra: Any) -> dict[str, Any]:
        """One element of a message body."""
        return {
            "messageType": kind,
            "runnerRequestId": self.request_id,
            "repositoryName": self.repo_name,
            "ownerName": self.owner,
            "jobId": self.job_id,
            "jobWorkflowRef": (
                f"{self.spec.repository}/.github/workflows/{self.spec.workflow}@refs/heads/main"
            ),
            "jobDisplayName": self.spec.name,
            "workflowRunId": self.run_id,
            "eventName": self.spec.event_name,
            "requestLabels": list(self.spec.labels),
            "queueTime": rfc3339(self.created_at),
            "scaleSetAssignTime": rfc3339(self.assigned_at if self.scale_set_id else 0.0),
            "runnerAssignTime": rfc3339(self.started_at if self.runner_id else 0.0),
            "finishTime": rfc3339(self.finished_at),
            **extra,
        }


# What GitHub stores of a RunnerSetting it is sent, on a create (A2) and a PATCH (A6) alike: the
# object whole, each field it does not name at its default, so a body reads back one way.
RUNNER_SETTING_DEFAULTS: dict[str, Any] = {
    "ephemeral": False,
    "isElastic": False,
    "disableUpdate": False,
}


def stored_runner_setting(sent: dict[str, Any]) -> dict[str, Any]:
    return {**RUNNER_SETTING_DEFAULTS, **sent}


@dataclass(slots=True)
class ScaleSetRecord:
    id: int
    name: str
    runner_group_id: int
    labels: list[str]
    created_at: float
    max_capacity: int | None = None  # last X-ScaleSetMaxCapacity; None = unlimited
    polled: bool = False  # the current session has polled: its capacity is known
    # Jobs its TotalAssignedJobs counts that do not exist: GitHub's statistics gone stale after
    # an incident (docs/github-emulator.md, "Stale statistics")
    phantom_assigned: int = 0
    pending: list[dict[str, Any]] = field(default_factory=list)  # events not yet in a message
    unacked: list[Message] = field(default_factory=list)
    acked: set[int] = field(default_factory=set)  # ids acknowledged once: a second ack is fine
    runner_setting: dict[str, Any] = field(
        default_factory=lambda: {"ephemeral": True, "isElastic": False, "disableUpdate": True}
    )
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def wake(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    def to_json(self, statistics: dict[str, int] | None, group_name: str) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "runnerGroupId": self.runner_group_id,
            "runnerGroupName": group_name,
            "labels": [{"type": "System", "name": label} for label in self.labels],
            "RunnerSetting": dict(self.runner_setting),
            "createdOn": "2026-01-01T00:00:00Z",
            "statistics": statistics,
            "status": None,
            "enabled": True,
        }


@dataclass(slots=True)
class Message:
    message_id: int
    events: list[dict[str, Any]]


@dataclass(slots=True)
class SessionRecord:
    session_id: str
    scale_set_id: int
    owner: str
    last_poll: float
    alive: bool = True
    opened: float = 0.0
    polls: int = 0  # message-queue GETs in progress: while one is open the session is not stale
    last_poll_wall: float = 0.0  # the last poll on the wall clock (sessions expire by it)

    def touch(self, now: float, wall: float) -> None:
        """Polled (or refreshed) at ``now`` on the emulated clock, ``wall`` on the wall clock."""
        self.last_poll, self.last_poll_wall = now, wall

    def to_json(self) -> dict[str, object]:
        """As ``GET /_fake/state`` shows it (docs/github-emulator.md)."""
        return {
            "sessionId": self.session_id,
            "owner": self.owner,
            "opened": self.opened,
            "lastPoll": self.last_poll,
            "polling": self.polls > 0,
        }


@dataclass(slots=True)
class Runner:
    id: int
    name: str
    scale_set_id: int
    credential: str  # what the JIT config lets the runner authenticate with
    created_at: float
    online: bool = False
    jit_used: bool = False
    job_id: str = ""
    labels: tuple[str, ...] = ()

    @property
    def busy(self) -> bool:
        return bool(self.job_id)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "runnerScaleSetId": self.scale_set_id,
            "os": "linux",
            "status": "online" if self.online else "offline",
            "busy": self.busy,
            "ephemeral": True,
            "disableUpdate": True,
            "labels": [{"name": label, "type": "System"} for label in self.labels],
        }


class RunnerTable(MutableMapping[int, Runner]):
    """The registered runners by id, knowing which names are taken: every registration asks
    (409 AgentExists), and a burst's thousands would each walk every runner. Every way in and
    out goes through ``__setitem__`` and ``__delitem__``, which keep the names; a runner's name
    never changes."""

    def __init__(self) -> None:
        self._by_id: dict[int, Runner] = {}
        self._names: Counter[str] = Counter()

    def has_name(self, name: str) -> bool:
        return self._names[name] > 0

    def __getitem__(self, key: int) -> Runner:
        return self._by_id[key]

    def __setitem__(self, key: int, runner: Runner) -> None:
        old = self._by_id.get(key)
        if old is not None:
            self._forget(old.name)
        self._by_id[key] = runner
        self._names[runner.name] += 1

    def __delitem__(self, key: int) -> None:
        self._forget(self._by_id.pop(key).name)

    def _forget(self, name: str) -> None:
        self._names[name] -= 1
        if self._names[name] <= 0:
            del self._names[name]

    def __iter__(self) -> Iterator[int]:
        return iter(self._by_id)

    def __len__(self) -> int:
        return len(self._by_id)

    def __contains__(self, key: object) -> bool:
        return key in self._by_id

    # The walks the emulator makes at every request read the dict itself.
    def values(self) -> ValuesView[Runner]:
        return self._by_id.values()

    def items(self) -> ItemsView[int, Runner]:
        return self._by_id.items()


def head_sha(repository: str, run_id: int) -> str:
    """A workflow run's head commit: the same for every job of the run."""
    return hashlib.sha1(f"{repository}/{run_id}".encode(), usedforsecurity=False).hexdigest()


@dataclass(slots=True)
class ChecksBook:
    """The check runs (by id), commit statuses (in order) and runs cancelled (repository, run
    id) written so far."""

    check_runs: dict[int, dict[str, Any]] = field(default_factory=dict)
    statuses: list[dict[str, Any]] = field(default_factory=list)
    cancelled_runs: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "checkRuns": list(self.check_runs.values()),
            "statuses": list(self.statuses),
            "cancelledRuns": list(self.cancelled_runs),
        }
