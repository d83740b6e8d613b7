"""``FakeGitHub``: an in-memory :class:`rungar.github.interface.GitHub` for the daemon's unit tests.

No HTTP, no clock: a test drives it. ``queue_demand``/``queue_job_event`` feed a scale set's
listener stream; ``start_runner``/``finish_runner`` play GitHub's side of a runner's life.
Every call is recorded in ``calls`` so tests can assert on what the engine asked for, and
``fail_next`` makes the next call of a method raise, to exercise the engine's error paths.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from rungar.config.model import ScaleSetConfig
from rungar.errors import GitHubError
from rungar.github.interface import (
    Budget,
    Demand,
    JobEvent,
    JobEventKind,
    ListenerEvent,
    RemoveOutcome,
    RunnerStatus,
    SessionPhase,
)
from rungar.model.machine import JobHint, conclusion_from_github
from rungar.model.phase import Phase
from rungar.model.runner_release import RunnerRelease


@dataclass(slots=True)
class FakeRunner:
    id: int
    name: str
    scale_set_id: int
    jit_config: str = field(repr=False)
    online: bool = False
    busy: bool = False


class FakeGitHub:
    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self.scale_sets: dict[str, int] = {}
        self.reruns: list[tuple[str, str, str]] = []  # (repository, run id, runner) re-run
        # What a waiting job shows on GitHub: True plays a GitHub App (check runs), False a
        # personal access token (commit statuses).
        self.app = True
        self.runner_release: RunnerRelease | None = None  # what releases/latest names
        self.head_reads: list[tuple[str, str]] = []  # (repository, run id) read
        self.check_runs: dict[int, list[dict[str, Any]]] = {}  # id -> each body written
        self.statuses: list[tuple[str, str, dict[str, Any]]] = []  # (repository, sha, body)
        self.cancelled_runs: list[tuple[str, str]] = []  # (repository, run id)
        self.labels: dict[str, tuple[str, ...]] = {}
        self.runners: dict[int, FakeRunner] = {}
        self.capacity: dict[str, int] = {}
        self.calls: list[tuple[str, object]] = []
        self._queues: dict[str, asyncio.Queue[ListenerEvent]] = {}
        self._failures: dict[str, list[Exception]] = {}
        self.phases: dict[str, SessionPhase] = {}  # a test plays a held or failing session
        self.renewals: dict[str, bool | BaseException] = {}  # a test plays a lost session
        # Several GitHub Apps: those GitHub refuses (revoked, suspended), and which App
        # registered each runner, by its id.
        self.refused_apps: set[int] = set()
        self.registered_by: dict[int, int] = {}

    # ---- test controls ---------------------------------------------------------------------

    def fail_next(self, method: str, error: Exception | None = None) -> None:
        self._failures.setdefault(method, []).append(error or GitHubError(f"{method} failed", 500))

    def _maybe_fail(self, method: str, arg: object) -> None:
        self.calls.append((method, arg))
        pending = self._failures.get(method)
        if pending:
            raise pending.pop(0)

    def queue(self, scale_set: str) -> asyncio.Queue[ListenerEvent]:
        return self._queues.setdefault(scale_set, asyncio.Queue())

    def queue_demand(self, scale_set: str, assigned: int, running: int = 0) -> Demand:
        demand = Demand(scale_set, self.scale_sets.get(scale_set, 0), assigned, running)
        self.queue(scale_set).put_nowait(demand)
        return demand

    def queue_job_event(
        self,
        scale_set: str,
        kind: JobEventKind,
        job_id: str,
        runner_name: str = "",
        result: str = "",
    ) -> JobEvent:
        runner_id = next((r.id for r in self.runners.values() if r.name == runner_name), 0)
        event = JobEvent(
            kind=kind,
            scale_set=scale_set,
            job_id=job_id,
            hint=JobHint(repository="octo-org/app", workflow="ci.yml", job="build", job_id=job_id),
            runner_name=runner_name,
            runner_id=runner_id,
            conclusion=conclusion_from_github(result),
        )
        self.queue(scale_set).put_nowait(event)
        return event

    def start_runner(self, name: str, *, busy: bool = True) -> None:
        runner = self._by_name(name)
        runner.online, runner.busy = True, busy

    def finish_runner(self, name: str) -> None:
        """The runner's job ended: an ephemeral runner's registration disappears."""
        runner = self._by_name(name)
        del self.runners[runner.id]

    def _by_name(self, name: str) -> FakeRunner:
        for runner in self.runners.values():
            if runner.name == name:
                return runner
        raise KeyError(name)

    # ---- the GitHub protocol ---------------------------------------------------------------

    async def ensure_scale_set(self, config: ScaleSetConfig) -> int:
        self._maybe_fail("ensure_scale_set", config.name)
        if config.name not in self.scale_sets:
            self.scale_sets[config.name] = next(self._ids)
        self.labels[config.name] = (config.name, *config.labels)
        return self.scale_sets[config.name]

    def budget(self) -> Budget:
        return Budget()

    async def latest_runner_release(self) -> RunnerRelease | None:
        self._maybe_fail("latest_runner_release", "")
        return self.runner_release

    def writes_check_runs(self) -> bool:
        return self.app

    async def head_commit(self, repository: str, run_id: str) -> str:
        self._maybe_fail("head_commit", run_id)
        self.head_reads.append((repository, run_id))
        return hashlib.sha1(f"{repository}/{run_id}".encode(), usedforsecurity=False).hexdigest()

    async def write_check_run(
        self, repository: str, check_run_id: int, body: dict[str, Any]
    ) -> int:
        self._maybe_fail("write_check_run", repository)
        check_run_id = check_run_id or next(self._ids)
        self.check_runs.setdefault(check_run_id, []).append(dict(body))
        return check_run_id

    async def write_commit_status(self, repository: str, sha: str, body: dict[str, Any]) -> None:
        self._maybe_fail("write_commit_status", repository)
        self.statuses.append((repository, sha, dict(body)))

    async def cancel_workflow_run(self, repository: str, run_id: str) -> None:
        self._maybe_fail("cancel_workflow_run", run_id)
        self.cancelled_runs.append((repository, run_id))

    async def rerun_failed_job(self, repository: str, run_id: str, runner_name: str) -> int:
        self._maybe_fail("rerun_failed_job", runner_name)
        self.reruns.append((repository, run_id, runner_name))
        return len(self.reruns)

    async def generate_jit_config(
        self, scale_set_id: int, runner_name: str, app: int = 0
    ) -> tuple[int, str]:
        self._maybe_fail("generate_jit_config", runner_name)
        if app in self.refused_apps:
            raise GitHubError(f"installation token: HTTP 401: app {app} revoked", 401)
        if scale_set_id not in self.scale_sets.values():
            raise GitHubError(f"scale set {scale_set_id} is gone", 404)
        for runner in list(self.runners.values()):
            if runner.name == runner_name:  # ARC's recovery: the stale registration is replaced
                del self.runners[runner.id]
        runner_id = next(self._ids)
        jit = f"fake-jit-{runner_id}"
        self.runners[runner_id] = FakeRunner(runner_id, runner_name, scale_set_id, jit)
        self.registered_by[runner_id] = app
        return runner_id, jit

    async def remove_runner(self, runner_id: int) -> RemoveOutcome:
        self._maybe_fail("remove_runner", runner_id)
        runner = self.runners.get(runner_id)
        if runner is not None and runner.busy:
            return RemoveOutcome.BUSY
        self.runners.pop(runner_id, None)
        return RemoveOutcome.REMOVED

    async def get_runner_by_name(self, name: str) -> RunnerStatus | None:
        self._maybe_fail("get_runner_by_name", name)
        for r in self.runners.values():
            if r.name == name:
                return RunnerStatus(r.name, r.id, r.online, r.busy, r.scale_set_id)
        return None

    async def list_runners(self, scale_set_id: int) -> list[RunnerStatus]:
        self._maybe_fail("list_runners", scale_set_id)
        return [
            RunnerStatus(r.name, r.id, r.online, r.busy, r.scale_set_id)
            for r in self.runners.values()
            if r.scale_set_id == scale_set_id
        ]

    async def list_all_runners(self) -> list[RunnerStatus]:
        self._maybe_fail("list_runners", 0)  # a fault for list_runners fails this call too
        return [
            RunnerStatus(r.name, r.id, r.online, r.busy, r.scale_set_id)
            for r in self.runners.values()
        ]

    async def listen(self, config: ScaleSetConfig) -> AsyncIterator[ListenerEvent]:
        self.capacity[config.name] = 0 if config.paused else config.max_runners
        queue = self.queue(config.name)
        while True:
            yield await queue.get()

    def set_max_capacity(self, scale_set: str, max_capacity: int) -> None:
        self.capacity[scale_set] = max_capacity

    def session_phase(self, scale_set: str) -> SessionPhase:
        return self.phases.get(scale_set, SessionPhase(Phase.LISTENING))

    async def renew_session(self, scale_set: str) -> bool:
        """Confirmed while its phase is ``listening``; ``renewals`` may script another answer
        per scale set (True, False, or an exception to raise)."""
        scripted = self.renewals.get(scale_set)
        if isinstance(scripted, BaseException):
            raise scripted
        if scripted is not None:
            return scripted
        return self.session_phase(scale_set).phase is Phase.LISTENING
