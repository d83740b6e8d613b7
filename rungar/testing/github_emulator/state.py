"""The emulated service's state and its dispatcher (docs/github-emulator.md).

Jobs are queued by the control API, matched to scale sets with a live session by label inclusion
(``self-hosted`` ignored, case-insensitive), and assigned within each scale set's last reported
``X-ScaleSetMaxCapacity``: straight to ``JobAssigned`` in broker mode (github.com), or offered as
``JobAvailable`` until acquired in legacy mode (GHES). A job no runner takes within
``assignment_timeout`` is withdrawn (``JobCompleted canceled``) and re-queued, at most three
times, then cancelled. Runners connect with their single-use JIT config, take one job
(``JobStarted``), report it (``JobCompleted``) and are deleted. Events are batched into messages
of at most 50 that stay until acked. Webhooks go through the ``on_webhook`` callback.
"""

from __future__ import annotations

import itertools
import random
import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rungar.model.runner_release import RunnerRelease
from rungar.model.runner_version import RunnerVersion, parse_runner_version
from rungar.testing.github_emulator.clock import EmulatorClock
from rungar.testing.github_emulator.faults import FaultPlan
from rungar.testing.github_emulator.model import (
    ChecksBook,
    Job,
    JobSpec,
    JobState,
    Message,
    Runner,
    RunnerTable,
    ScaleSetRecord,
    SessionRecord,
)
from rungar.testing.github_emulator.tokens import TokenAuthority

MAX_EVENTS_PER_MESSAGE = 50
FIRST_MESSAGE_ID = 100_000_000
UNASSIGNED = (JobState.QUEUED,)
HOLDING = (JobState.AVAILABLE, JobState.ASSIGNED, JobState.RUNNING)


@dataclass(slots=True)
class EmulatorOptions:
    owner: str = "octo-org"
    acquire_mode: str = "broker"  # "broker" (github.com) or "legacy" (GHES: JobAvailable + acquire)
    zero_request_ids: bool = False  # the broker's runnerRequestId 0 (GARM PR #459)
    long_poll_seconds: float = 50.0  # real seconds a GET waits before 202
    session_idle_ttl: float = 120.0  # seconds without a GET before a session is stale
    # The clock those seconds are counted on: "emulated", GitHub's, so a compressed clock
    # compresses a dead daemon's session expiry too (a standby takes over, a restarted daemon
    # gets its session back, in compressed time) and a jump can end a session nobody polls; or
    # "wall", as tokens are, for a client that polls by its own clock at a high clock factor
    # (at 120× a 1.5 s gap between two polls is 3 emulated minutes).
    session_clock: str = "emulated"
    assignment_timeout: float = 300.0  # emulated seconds an assigned job waits for a runner
    max_reassignments: int = 3
    # Token lifetimes are real (wall-clock) seconds: clients renew tokens by their own clock.
    token_ttl: float = 3600.0  # installation and registration tokens
    admin_token_ttl: float = 3600.0
    mq_token_ttl: float = 3600.0
    clock_factor: float = 1.0
    pats: dict[str, str] = field(default_factory=lambda: {"emulator-pat": "octo-org"})
    apps: dict[str, str] = field(default_factory=dict)  # app id -> public key PEM
    installations: dict[int, str] = field(default_factory=lambda: {1: "octo-org"})
    # GitHub's stateless installation tokens since 2026 (ghs_<app id>_<JWT>), or False for the
    # older ghs_ + 36 characters; the X-GitHub-Stateless-S2S-Token header overrides it per
    # request, as on GitHub.
    stateless_installation_tokens: bool = True
    runner_groups: dict[int, str] = field(default_factory=lambda: {1: "Default"})
    registration_status: int = 201
    single_label: bool = False  # GHES without custom labels: only the name is kept
    strict_capacity: bool = False  # 400 when X-ScaleSetMaxCapacity is missing
    rate_limit: int = 5000
    jit_rate_per_minute: float = 0.0  # GitHub's registration limit on A13 and R4; 0 = none
    jit_rate_window: float = 60.0  # the seconds that limit is counted over (GitHub's: a minute)
    seed: int | None = None  # None: the lowest scale-set id wins a job; else seeded choice
    # Stale statistics: every scale set's TotalAssignedJobs counts this many jobs that do not
    # exist, as GitHub's can for hours after an incident; POST /_fake/scalesets/ID/stale
    # changes it for one scale set
    stale_assigned_jobs: int = 0
    # GitHub's minimum runner version: a runner older than it is refused when it connects
    # (403, "Runner version v2.320.0 is deprecated and cannot receive messages."), as GitHub
    # does; POST /_fake/runner-minimum moves it during a run. "" = every version is taken.
    runner_minimum: str = "2.329.0"
    # The latest runner release GET /repos/actions/runner/releases/latest names, published
    # runner_latest_age emulated seconds before the emulator starts ("" = none: 404, as a GitHub
    # Enterprise Server without the repository); POST /_fake/runner-release publishes another
    runner_latest: str = "2.330.0"
    runner_latest_age: float = 86400.0
    webhook_url: str = ""
    webhook_secret: str = ""
    # HTTPS: a certificate (PEM, its chain after it) and its key; "" serves plain HTTP.
    tls_cert_file: str = ""
    tls_key_file: str = ""
    # The host name in the URLs the emulator prints (its certificate's name, one a proxy may
    # resolve): "" is the address it binds.
    public_host: str = ""
    # The base URL written into runners' JIT configs (where runners reach the emulator): "" is
    # the one the registration came to. Set when the daemon reaches the emulator by a way its
    # runners do not take (a fault proxy between the two, say).
    runner_url: str = ""


def labels_match(job_labels: tuple[str, ...], scale_set_labels: list[str]) -> bool:
    have = {x.lower() for x in scale_set_labels}
    return all(x.lower() in have for x in job_labels if x.lower() != "self-hosted")


class EmulatorState:
    def __init__(
        self,
        options: EmulatorOptions,
        clock: EmulatorClock,
        on_webhook: Callable[[str, dict[str, Any]], object] | None = None,
    ) -> None:
        self.options = options
        self.clock = clock
        self.runner_minimum = parse_runner_version(options.runner_minimum)
        latest = parse_runner_version(options.runner_latest)
        self.runner_release: RunnerRelease | None = (
            None
            if latest is None
            else RunnerRelease(latest, clock.now() - options.runner_latest_age)
        )
        self.tokens = TokenAuthority(
            clock,
            dict(options.apps),
            dict(options.installations),
            options.stateless_installation_tokens,
        )
        self.tokens.pats.update(options.pats)
        self.faults = FaultPlan()
        for jit_route in ("A13", "R4"):
            self.faults.throttle(jit_route, options.jit_rate_per_minute, options.jit_rate_window)
        self.on_webhook = on_webhook
        self.scale_sets: dict[int, ScaleSetRecord] = {}
        self.sessions: dict[str, SessionRecord] = {}
        self.runners = RunnerTable()
        self.jobs: dict[str, Job] = {}
        self.requests: list[dict[str, Any]] = []
        self.rate_remaining = options.rate_limit
        self.rate_reset = clock.now() + 3600
        self._ids = itertools.count(1)
        self._message_ids = itertools.count(FIRST_MESSAGE_ID)
        self._rng = random.Random(options.seed)
        self.runners_created = 0
        # Runners registered (JIT configs given out) by caller: an App installation
        # ("installation:N") or "" (a PAT), whose registration limit they count against.
        self.registered_by: dict[str, int] = {}
        self._withdraw_due = 0.0  # when tick next walks the jobs (see tick)
        self._withdraw_timeout = options.assignment_timeout
        self.closing = False  # set on shutdown: long polls answer at once
        # check runs, commit statuses and runs cancelled (github_emulator.checks)
        self.checks = ChecksBook()

    def close(self) -> None:
        self.closing = True
        for record in self.scale_sets.values():
            record.wake()

    # ---- statistics --------------------------------------------------------------------------

    def _waiting_for(self, record: ScaleSetRecord) -> int:
        """Queued jobs this scale set will be assigned at its session's first poll: the service
        counts them in the session's statistics already (its word on pending work)."""
        if record.polled or self.live_session(record.id) is None:
            return 0
        count = 0
        for job in self.jobs.values():
            if job.state is not JobState.QUEUED or not labels_match(job.spec.labels, record.labels):
                continue
            first = min(
                (
                    r.id
                    for r in self.scale_sets.values()
                    if labels_match(job.spec.labels, r.labels)
                    and self.live_session(r.id) is not None
                ),
                default=0,
            )
            count += first == record.id
        if record.max_capacity is not None:
            count = min(count, record.max_capacity)
        return count

    def statistics(self, scale_set_id: int) -> dict[str, int]:
        record = self.scale_sets.get(scale_set_id)
        waiting = self._waiting_for(record) if record is not None else 0
        # The first poll offers those jobs as the mode does: assigned (broker) or available
        # (legacy, until acquired), so the session's statistics count them the same way.
        legacy = self.options.acquire_mode == "legacy"
        jobs = [j for j in self.jobs.values() if j.scale_set_id == scale_set_id]
        runners = [r for r in self.runners.values() if r.scale_set_id == scale_set_id and r.online]
        busy = sum(1 for r in runners if r.busy)
        return {
            "totalAvailableJobs": (waiting if legacy else 0)
            + sum(1 for j in jobs if j.state is JobState.AVAILABLE),
            "totalAcquiredJobs": 0,  # acquired jobs are assigned at once here
            "totalAssignedJobs": (0 if legacy else waiting)
            + sum(1 for j in jobs if j.state in (JobState.ASSIGNED, JobState.RUNNING))
            + (record.phantom_assigned if record is not None else 0),
            "totalRunningJobs": sum(1 for j in jobs if j.state is JobState.RUNNING),
            "totalRegisteredRunners": len(runners),
            "totalBusyRunners": busy,
            "totalIdleRunners": len(runners) - busy,
        }

    def scale_set_json(self, record: ScaleSetRecord) -> dict[str, Any]:
        group = self.options.runner_groups.get(record.runner_group_id, "")
        return record.to_json(self.statistics(record.id), group)

    # ---- scale sets and sessions ------------------------------------------------------------

    def next_id(self) -> int:
        return next(self._ids)

    def find_scale_set(self, group_id: int, name: str) -> ScaleSetRecord | None:
        for record in self.scale_sets.values():
            if record.runner_group_id == group_id and record.name == name:
                return record
        return None

    def _kept_labels(self, name: str, labels: list[str]) -> list[str]:
        return [name] if self.options.single_label else [name, *[x for x in labels if x != name]]

    def create_scale_set(self, name: str, group_id: int, labels: list[str]) -> ScaleSetRecord:
        record = ScaleSetRecord(
            self.next_id(), name, group_id, self._kept_labels(name, labels), self.clock.now()
        )
        record.phantom_assigned = self.options.stale_assigned_jobs
        self.scale_sets[record.id] = record
        return record

    def set_labels(self, record: ScaleSetRecord, labels: list[str]) -> None:
        """A6 with labels: replaced, GHES single-label mode keeping only the name."""
        record.labels = self._kept_labels(record.name, labels)

    def delete_scale_set(self, scale_set_id: int) -> None:
        record = self.scale_sets.pop(scale_set_id, None)
        for session in self.sessions.values():
            if session.scale_set_id == scale_set_id:
                session.alive = False
        for job in self.jobs.values():
            if job.scale_set_id == scale_set_id and job.state in (
                JobState.AVAILABLE,
                JobState.ASSIGNED,
            ):
                job.state, job.scale_set_id = JobState.QUEUED, 0
        if record is not None:
            record.wake()
        self.dispatch()

    def live_session(self, scale_set_id: int) -> SessionRecord | None:
        now, wall = self.clock.now(), self.clock.wall()
        for session in self.sessions.values():
            if session.scale_set_id != scale_set_id or not session.alive:
                continue
            if session.polls:
                # A poll in progress keeps its session alive, however far the clock jumped.
                session.touch(now, wall)
                return session
            idle = (
                wall - session.last_poll_wall
                if self.options.session_clock == "wall"
                else now - session.last_poll
            )
            if idle > self.options.session_idle_ttl:
                session.alive = False  # stale: its owner stopped polling (a crash)
                continue
            return session
        return None

    def open_session(self, scale_set_id: int, owner: str) -> SessionRecord | None:
        """A new session, or None when a live one exists (409)."""
        if self.live_session(scale_set_id) is not None:
            return None
        now = self.clock.now()
        session = SessionRecord(str(uuid.uuid4()), scale_set_id, owner, now, opened=now)
        session.touch(now, self.clock.wall())
        self.sessions[session.session_id] = session
        # Nothing is assigned until the new session's first poll says how much it can take.
        self.scale_sets[scale_set_id].polled = False
        return session

    def evict_session(self, scale_set_id: int) -> None:
        for session in self.sessions.values():
            if session.scale_set_id == scale_set_id:
                session.alive = False
        record = self.scale_sets.get(scale_set_id)
        if record is not None:
            record.wake()

    # ---- messages ----------------------------------------------------------------------------

    def emit(self, scale_set_id: int, event: dict[str, Any]) -> None:
        record = self.scale_sets.get(scale_set_id)
        if record is not None:
            record.pending.append(event)
            record.wake()

    def next_message(self, record: ScaleSetRecord, last_message_id: int) -> Message | None:
        """The oldest unacked message after ``last_message_id``, batching pending events."""
        while record.pending:
            batch = record.pending[:MAX_EVENTS_PER_MESSAGE]
            del record.pending[:MAX_EVENTS_PER_MESSAGE]
            record.unacked.append(Message(next(self._message_ids), batch))
        for message in record.unacked:
            if message.message_id > last_message_id:
                return message
        return None

    def ack(self, record: ScaleSetRecord, message_id: int) -> bool:
        """False only for an id never delivered: acknowledging twice is fine, as on GitHub."""
        for message in record.unacked:
            if message.message_id == message_id:
                record.unacked.remove(message)
                record.acked.add(message_id)
                return True
        return message_id in record.acked

    # ---- jobs and the dispatcher -------------------------------------------------------------

    def queue_job(self, spec: JobSpec) -> Job:
        n = self.next_id()
        job = Job(
            job_id=str(uuid.uuid4()),
            request_id=0 if self.options.zero_request_ids else 1000 + n,
            workflow_job_id=5_000_000 + n,
            run_id=spec.run_id or 9_000_000 + n,
            spec=spec,
            created_at=self.clock.now(),
            state=JobState.WAITING if spec.gated else JobState.QUEUED,
        )
        self.jobs[job.job_id] = job
        self.webhook(job, "queued")
        if spec.gated:
            self.webhook(job, "waiting")
        self.dispatch()
        return job

    def approve(self, job: Job) -> None:
        if job.state is JobState.WAITING:
            job.state = JobState.QUEUED
            self.webhook(job, "queued")
            self.dispatch()

    def _holding(self) -> dict[int, int]:
        """Scale set id -> the jobs it holds (offered, assigned or running)."""
        holding: dict[int, int] = {}
        for job in self.jobs.values():
            if job.scale_set_id and job.state in HOLDING:
                holding[job.scale_set_id] = holding.get(job.scale_set_id, 0) + 1
        return holding

    def dispatch(self) -> None:
        """Offer or assign every queued job a scale set can take now.

        Each scale set takes jobs within its last reported capacity: what it holds is counted
        once here and followed as jobs are assigned, not counted again for every job (a burst
        queues thousands at once), and only the queued jobs are sorted, oldest first.
        """
        queued = [j for j in self.jobs.values() if j.state is JobState.QUEUED]
        if not queued:
            return
        holding = self._holding()
        by_id = sorted(self.scale_sets.values(), key=lambda r: r.id)
        for job in sorted(queued, key=lambda j: j.created_at):
            candidates = [
                r
                for r in by_id
                if labels_match(job.spec.labels, r.labels)
                and r.polled
                and self.live_session(r.id) is not None
                and (r.max_capacity is None or holding.get(r.id, 0) < r.max_capacity)
            ]
            if not candidates:
                continue
            record = candidates[0] if self.options.seed is None else self._rng.choice(candidates)
            holding[record.id] = holding.get(record.id, 0) + 1
            job.scale_set_id = record.id
            job.assigned_at = self.clock.now()
            if self.options.acquire_mode == "legacy":
                job.state = JobState.AVAILABLE
                url = f"/_apis/runtime/runnerscalesets/{record.id}/acquirejobs"
                self.emit(record.id, job.event("JobAvailable", acquireJobUrl=url))
            else:
                job.state = JobState.ASSIGNED
                self.emit(record.id, job.event("JobAssigned"))

    def acquire(self, scale_set_id: int, request_ids: list[int]) -> list[int]:
        acquired = []
        for job in self.jobs.values():
            if (
                job.scale_set_id == scale_set_id
                and job.state is JobState.AVAILABLE
                and job.request_id in request_ids
            ):
                job.state = JobState.ASSIGNED
                job.assigned_at = self.clock.now()
                acquired.append(job.request_id)
                self.emit(scale_set_id, job.event("JobAssigned"))
        return acquired

    def tick(self) -> None:
        """Withdraw jobs no runner took in time; re-queue them up to ``max_reassignments``.

        The jobs are walked only once one may be due: a walk notes when the next held job
        comes due, and a job offered after it cannot come due sooner (it waits the whole
        ``assignment_timeout`` from then)."""
        now = self.clock.now()
        timeout = self.options.assignment_timeout
        if now >= self._withdraw_due or timeout != self._withdraw_timeout:
            self._withdraw(now, timeout)
        self.dispatch()

    def _withdraw(self, now: float, timeout: float) -> None:
        due = now + timeout
        for job in list(self.jobs.values()):
            if job.state not in (JobState.AVAILABLE, JobState.ASSIGNED):
                continue
            if now - job.assigned_at < timeout:
                due = min(due, job.assigned_at + timeout)
                continue
            scale_set_id = job.scale_set_id
            job.reassignments += 1
            self.emit(
                scale_set_id,
                job.event("JobCompleted", result="canceled", runnerId=0, runnerName=""),
            )
            job.scale_set_id = 0
            if job.reassignments > self.options.max_reassignments:
                self._finish(job, "canceled")
            else:
                job.state = JobState.QUEUED
        self._withdraw_due, self._withdraw_timeout = due, timeout

    def cancel(self, job: Job) -> None:
        if job.state is JobState.COMPLETED:
            return
        if job.state is JobState.RUNNING:
            self.complete(job, "canceled")
            return
        if job.scale_set_id:
            self.emit(
                job.scale_set_id,
                job.event("JobCompleted", result="canceled", runnerId=0, runnerName=""),
            )
        self._finish(job, "canceled")

    def _finish(self, job: Job, result: str) -> None:
        job.state = JobState.COMPLETED
        job.result = result
        job.finished_at = self.clock.now()
        self.webhook(job, "completed")

    # ---- runners -----------------------------------------------------------------------------

    def register_runner(self, scale_set_id: int, name: str) -> Runner | None:
        """A13: None when the name is taken (409 AgentExists)."""
        if self.runners.has_name(name):
            return None
        record = self.scale_sets[scale_set_id]
        runner = Runner(
            self.next_id(),
            name,
            scale_set_id,
            "rc_" + secrets.token_urlsafe(24),
            self.clock.now(),
            labels=tuple(record.labels),
        )
        self.runners[runner.id] = runner
        self.runners_created += 1
        return runner

    def runner_by_credential(self, credential: str) -> Runner | None:
        for runner in self.runners.values():
            if runner.credential == credential:
                return runner
        return None

    def refuses_version(self, version: RunnerVersion | None) -> bool:
        """Whether GitHub's minimum is above the runner's version (an unstated one is taken)."""
        return (
            version is not None
            and self.runner_minimum is not None
            and (version < self.runner_minimum)
        )

    def connect(self, runner: Runner) -> bool:
        """The runner uses its JIT config; False when it was used before (single use)."""
        if runner.jit_used:
            return False
        runner.jit_used = True
        runner.online = True
        self.dispatch()
        return True

    def take_job(self, runner: Runner) -> Job | None:
        """Bind the oldest assigned job of the runner's scale set to it (``JobStarted``).

        A runner removed meanwhile takes nothing, even from a request it opened before: GitHub
        hands no job to a registration it deleted."""
        if runner.job_id:
            return self.jobs.get(runner.job_id)
        if not runner.online or self.runners.get(runner.id) is not runner:
            return None
        waiting = [
            j
            for j in self.jobs.values()
            if j.scale_set_id == runner.scale_set_id
            and j.state is JobState.ASSIGNED
            and not j.runner_id
        ]
        if not waiting:
            return None
        job = min(waiting, key=lambda j: j.assigned_at)
        job.state = JobState.RUNNING
        job.runner_id, job.runner_name = runner.id, runner.name
        job.started_at = self.clock.now()
        runner.job_id = job.job_id
        self.emit(
            runner.scale_set_id, job.event("JobStarted", runnerId=runner.id, runnerName=runner.name)
        )
        self.webhook(job, "in_progress")
        return job

    def complete(self, job: Job, result: str) -> None:
        """The job ends; its ephemeral runner is deleted."""
        if job.state is JobState.COMPLETED:
            return
        job.finished_at = self.clock.now()  # the JobCompleted event carries it
        self.emit(
            job.scale_set_id,
            job.event(
                "JobCompleted", result=result, runnerId=job.runner_id, runnerName=job.runner_name
            ),
        )
        runner = self.runners.pop(job.runner_id, None)
        if runner is not None:
            runner.online = False
        self._finish(job, result)
        self.dispatch()

    def remove_runner(self, runner_id: int) -> str:
        """A17: "removed", "busy" or "missing"."""
        runner = self.runners.get(runner_id)
        if runner is None:
            return "missing"
        if runner.busy:
            return "busy"
        del self.runners[runner_id]
        runner.online = False
        return "removed"

    def lose_runner(self, runner: Runner) -> Job | None:
        """The runner's machine is gone: GitHub stops hearing from it and fails the job it ran
        (``JobCompleted`` failed, with the runner's name); the registration goes."""
        job = self.jobs.get(runner.job_id)
        runner.online = False
        if job is None or job.state is not JobState.RUNNING:
            self.runners.pop(runner.id, None)
            return None
        self.complete(job, "failed")
        return job

    def rerun(self, job: Job) -> Job | None:
        """The job's re-run route: a completed job that did not succeed is queued again as the
        run's next attempt (a new job id, the same run); None when it cannot be re-run."""
        if job.state is not JobState.COMPLETED or job.rerun_by or job.result == "succeeded":
            return None
        again = self.queue_job(job.spec)
        again.run_id, again.attempt = job.run_id, job.attempt + 1
        job.rerun_by = again.job_id
        return again

    def crash_runner(self, runner: Runner) -> None:
        """The machine died: the runner goes offline; a job it held is re-queued."""
        runner.online = False
        job = self.jobs.get(runner.job_id)
        if job is not None and job.state is JobState.RUNNING:
            job.state, job.runner_id, job.runner_name = JobState.ASSIGNED, 0, ""
            job.assigned_at = self.clock.now()
        runner.job_id = ""

    # ---- webhooks ----------------------------------------------------------------------------

    def webhook(self, job: Job, action: str) -> None:
        if self.on_webhook is None:
            return
        conclusion = None
        if action == "completed":
            conclusion = {"succeeded": "success", "failed": "failure", "canceled": "cancelled"}.get(
                job.result.lower(), job.result.lower()
            )
        has_runner = action in ("in_progress", "completed") and bool(job.runner_id)
        payload = {
            "action": action,
            "workflow_job": {
                "id": job.workflow_job_id,
                "run_id": job.run_id,
                "run_attempt": 1,
                "name": job.spec.name,
                "workflow_name": job.spec.workflow,
                "status": action if action != "waiting" else "waiting",
                "conclusion": conclusion,
                "labels": list(job.spec.labels),
                "runner_id": job.runner_id if has_runner else None,
                "runner_name": job.runner_name if has_runner else None,
                "runner_group_id": 1 if has_runner else None,
                "runner_group_name": "Default" if has_runner else None,
                "head_branch": "main",
                "steps": [],
            },
            "repository": {
                "name": job.repo_name,
                "full_name": job.spec.repository,
                "owner": {"login": job.owner},
            },
            "organization": {"login": job.owner},
            "sender": {"login": "octocat"},
        }
        self.on_webhook("workflow_job", payload)
