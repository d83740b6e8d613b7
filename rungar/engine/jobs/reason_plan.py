"""Why a job waits, told on GitHub: what to write and when, decided from a snapshot and ``now``
(docs/github.md, "Why a job waits, on GitHub").

A pure module: it reads the snapshot the engine takes (the jobs waiting, each scale set's reason
in the words of ``rungar status``, what is already on GitHub, the REST calls already spent) and
returns a :class:`ReasonPlan`, which :mod:`rungar.engine.jobs.reasons` carries out.

The rules:

- A job is *waiting* from when this daemon heard it assigned until it starts or ends. Jobs are
  told in batches: one notice per workflow run and scale set, named ``rungar: <scale set>``,
  on the run's head commit, which is read once per run.
- A notice is published once the oldest of its jobs has waited ``after``; nothing is written
  for a job that starts sooner.
- While its jobs wait, it is rewritten when its reason changed, at most every
  ``update_every``.
- When none of its jobs waits any more, it is concluded: ``waited 4m 12s: <its last reason>``
  (a check run ``neutral``; a commit status ``success``, its description cut to 140).
- With ``unservable: {cancel_after}`` on its scale set, a job that has waited ``cancel_after``
  while no provider of the scale set can ever take its runner (each refused it INVALID, or has
  not answered for ``cancel_after``) has its run cancelled and its notice concluded
  ``failure`` with the reason. Never for a job waiting on FULL, a hold, a backoff of another
  kind or a disabled provider: any provider not INVALID nor silent keeps the job waiting.
- All of it within ``rest_share`` percent of GitHub's hourly REST budget, counted over the
  trailing hour, and never more than ``burst_share`` percent of that share (a tenth) in any
  ``burst_window`` (a minute: GitHub's secondary limits punish bursts of writes): concludes
  first (they end a notice), then the oldest jobs' publishes (a run's head is read only with
  room left for its publish too), then updates, longest unchanged first. What does not fit
  waits for the next turn.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from rungar.config.model import JobReasonsConfig
from rungar.model.sentences import (
    cannot_be_reached,
    crash_sentence,
    hold_text,
    refuses_as_invalid,
    skip_sentence,
    unservable,
)
from rungar.model.units import format_seconds
from rungar.placement import Fleet

HOUR = 3600.0  # GitHub's REST budget is counted over the hour
UNKNOWN_LIMIT = 5000  # GitHub's hourly REST budget of a token, until an answer tells it
# The turns' pace unless job_reasons.turn_every sets it: a quarter of the shorter of the
# threshold and the update interval, within these bounds.
TURN_MIN = 0.25
TURN_MAX = 5.0
STATUS_DESCRIPTION_MAX = 140  # GitHub's limit on a commit status's description
CUT = "…"


@dataclass(frozen=True, slots=True, order=True)
class NoticeKey:
    """One notice: a workflow run's jobs waiting on one scale set."""

    repository: str
    run_id: str
    scale_set: str

    @property
    def run(self) -> tuple[str, str]:
        return (self.repository, self.run_id)


@dataclass(frozen=True, slots=True)
class WaitingJob:
    job_id: str
    key: NoticeKey
    assigned_at: float  # on the engine's clock


@dataclass(frozen=True, slots=True)
class Notice:
    """A notice already on GitHub."""

    key: NoticeKey
    check_run_id: int  # 0: a commit status
    written_at: float
    reason: str  # the reason last written
    since: float  # when its oldest job was assigned


@dataclass(frozen=True, slots=True)
class Unservable:
    """A scale set no provider can ever serve now: why, since when (the latest of its silent
    providers' first silence; 0 when every one refused INVALID), and its ``cancel_after``."""

    why: tuple[str, ...]
    since: float
    cancel_after: float


@dataclass(frozen=True, slots=True)
class ReasonSnapshot:
    waiting: tuple[WaitingJob, ...]
    reasons: Mapping[str, str]  # scale set -> why its jobs wait and what happens next
    notices: Mapping[NoticeKey, Notice]
    heads: Mapping[tuple[str, str], str]  # (repository, run id) -> head commit read
    spent: tuple[float, ...]  # when each REST call of these notices was made (trailing hour)
    budget_limit: int | None  # GitHub's hourly REST budget as last read; None: not known
    check_runs: bool  # a GitHub App: check runs; else commit statuses
    settings: JobReasonsConfig
    unservable: Mapping[str, Unservable] = field(default_factory=dict)  # by scale set
    cancelled: frozenset[tuple[str, str]] = frozenset()  # runs cancelled: told nothing more


@dataclass(frozen=True, slots=True)
class ReadHead:
    repository: str
    run_id: str


@dataclass(frozen=True, slots=True)
class Write:
    """Publish (no notice yet), rewrite or conclude ``key``'s notice with ``body``."""

    key: NoticeKey
    kind: str  # "publish", "update", "conclude" or "fail" (its run cancelled)
    reason: str
    since: float
    body: dict[str, object]


@dataclass(frozen=True, slots=True)
class Cancel:
    """Cancel ``write.key``'s run, then write its notice ``fail`` (``write``)."""

    write: Write


@dataclass(frozen=True, slots=True)
class ReasonPlan:
    heads: tuple[ReadHead, ...] = ()
    writes: tuple[Write, ...] = ()
    cancels: tuple[Cancel, ...] = ()
    deferred: int = 0  # calls due that the budget share kept for a later turn
    allowance: int = 0  # calls the share allowed this turn


def allowance(snapshot: ReasonSnapshot, now: float) -> int:
    """REST calls the share allows now: what is left of the hour's share, and of the burst
    window's part of it."""
    settings = snapshot.settings
    limit = snapshot.budget_limit or UNKNOWN_LIMIT
    hourly = max(1, math.floor(limit * settings.rest_share / 100))
    per_burst = max(1, math.ceil(hourly * settings.burst_share / 100))
    in_hour = sum(1 for at in snapshot.spent if now - at < HOUR)
    in_burst = sum(1 for at in snapshot.spent if now - at < settings.burst_window)
    return max(0, min(hourly - in_hour, per_burst - in_burst))


def turn_every(settings: JobReasonsConfig) -> float:
    """Seconds between two turns of the task that carries the plans out."""
    if settings.turn_every is not None:
        return settings.turn_every
    return min(TURN_MAX, max(TURN_MIN, min(settings.after, settings.update_every) / 4))


def plan_reasons(snapshot: ReasonSnapshot, now: float) -> ReasonPlan:
    settings = snapshot.settings
    oldest: dict[NoticeKey, float] = {}
    for job in snapshot.waiting:
        if job.key.run in snapshot.cancelled:
            continue  # its run is cancelled: its jobs end, nothing more is told
        known = oldest.get(job.key)
        oldest[job.key] = job.assigned_at if known is None else min(known, job.assigned_at)
    to_cancel = []
    for key, since in sorted(oldest.items(), key=lambda item: (item[1], item[0])):
        never = snapshot.unservable.get(key.scale_set)
        if (
            never is not None
            and now - since >= never.cancel_after
            and now - never.since >= never.cancel_after
        ):
            reason = unservable(key.scale_set, never.why, now - since)
            to_cancel.append(_write(snapshot, key, "fail", reason, since, now))
    failing = {write.key for write in to_cancel}
    for key in failing:
        del oldest[key]
    concludes = [
        _write(snapshot, notice.key, "conclude", notice.reason, notice.since, now)
        for key, notice in sorted(snapshot.notices.items())
        if key not in oldest and key not in failing
    ]
    due = sorted(
        (since, key)
        for key, since in oldest.items()
        if settings.enabled and key not in snapshot.notices and now - since >= settings.after
    )
    updates = []
    for notice in sorted(snapshot.notices.values(), key=lambda n: (n.written_at, n.key)):
        reason = snapshot.reasons.get(notice.key.scale_set, "")
        if (
            settings.enabled
            and notice.key in oldest
            and reason != notice.reason
            and now - notice.written_at >= settings.update_every
        ):
            updates.append(_write(snapshot, notice.key, "update", reason, notice.since, now))
    left = allowance(snapshot, now)
    budget = left
    writes: list[Write] = []
    heads: list[ReadHead] = []
    asked: set[tuple[str, str]] = set()
    deferred = 0
    cancels: list[Cancel] = []
    for write in to_cancel:  # first: a run that can never be served ends now
        cost = 2 if write.key.run in snapshot.heads else 3  # cancel, (head,) conclusion
        if left >= cost:
            cancels.append(Cancel(write))
            left -= cost
        else:
            deferred += 1
    for write in concludes:
        if left > 0:
            writes.append(write)
            left -= 1
        else:
            deferred += 1
    for since, key in due:
        if key.run not in snapshot.heads:
            if key.run in asked:
                continue  # its run's head is read once, for all its scale sets
            # Read only with room left for its publish as well: a share spent on reading
            # every run's head would tell nobody anything until the next window.
            if left > 1:
                heads.append(ReadHead(*key.run))
                asked.add(key.run)
                left -= 2
            else:
                deferred += 1
            continue
        if left > 0:
            reason = snapshot.reasons.get(key.scale_set, "")
            writes.append(_write(snapshot, key, "publish", reason, since, now))
            left -= 1
        else:
            deferred += 1
    for write in updates:
        if left > 0:
            writes.append(write)
            left -= 1
        else:
            deferred += 1
    return ReasonPlan(tuple(heads), tuple(writes), tuple(cancels), deferred, budget)


def title(key: NoticeKey) -> str:
    return f"rungar: {key.scale_set}"


def _write(
    snapshot: ReasonSnapshot, key: NoticeKey, kind: str, reason: str, since: float, now: float
) -> Write:
    settings = snapshot.settings
    waited = max(0.0, now - since)
    sha = snapshot.heads.get(key.run, "")
    if kind == "conclude":
        text = f"waited {format_seconds(waited)}: {reason}"
    elif kind == "fail":
        text = reason
    else:
        text = f"waiting {format_seconds(waited)}: {reason}"
    link = f"\n\nThe fleet: {settings.fleet_url}" if settings.fleet_url else ""
    body: dict[str, object]
    if snapshot.check_runs:
        body = {
            "name": title(key),
            "head_sha": sha,
            "status": "completed" if kind in ("conclude", "fail") else "in_progress",
            "output": {"title": _fit(text, 255), "summary": _fit(text, 60_000) + link},
        }
        if kind in ("conclude", "fail"):
            body["conclusion"] = "neutral" if kind == "conclude" else "failure"
        if settings.fleet_url:
            body["details_url"] = settings.fleet_url
    else:
        body = {
            "state": {"conclude": "success", "fail": "failure"}.get(kind, "pending"),
            "context": title(key),
            "description": _fit(text, STATUS_DESCRIPTION_MAX),
        }
        if settings.fleet_url:
            body["target_url"] = settings.fleet_url
    return Write(key, kind, reason, since, body)


def _fit(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - len(CUT)].rstrip() + CUT


# ---------------------------------------------------------------- a scale set's reason


def scale_set_reason(fleet: Fleet, scale_set: str, now: float, starting: Iterable[str] = ()) -> str:
    """Why the scale set's jobs wait and what happens next, in the words of ``rungar status``:
    each provider it skips with its skip line (a backoff's and a crash loop's as ``status``
    says them, a hold's as its providers' lines say it), a provider whose backoff just ended
    with its last answer ("tries it again in 0s"), then what is tried next. ``starting``
    names the providers where one of its runners is starting."""
    found = fleet.candidates(scale_set, now)
    parts: list[str] = []
    for skip in found.skips:
        loop = fleet.crash_loop(scale_set, skip.provider)
        backoff = fleet.backoff(scale_set, skip.provider)
        if loop is not None and loop.active(now):
            parts.append(
                crash_sentence(
                    scale_set, skip.provider, loop.last_error, loop.refusals, loop.remaining(now)
                )
            )
        elif backoff is not None and backoff.active(now):
            parts.append(
                skip_sentence(
                    scale_set,
                    skip.provider,
                    backoff.full,
                    backoff.refusals,
                    backoff.remaining(now),
                    backoff.last_error,
                )
            )
        else:
            parts.append(str(skip))
    for provider in found.order:
        # Its wait is over and it is tried again next: its last answer still says why.
        backoff = fleet.backoff(scale_set, provider)
        if backoff is not None and backoff.refusals:
            parts.append(
                skip_sentence(
                    scale_set, provider, backoff.full, backoff.refusals, 0.0, backoff.last_error
                )
            )
    for provider in fleet.providers:
        hold = fleet.hold_on(provider, now)
        if hold is not None and hold.holder == scale_set:
            parts.append(f"{provider} held {hold_text(hold.holder, hold.priority)}")
    on = sorted(set(starting))
    if on:
        parts.append(f"next: its runner is starting on {', '.join(on)}")
    elif found.order:
        parts.append(f"next: tries {' then '.join(found.order)}")
    elif found.gone or found.scale_set_limit or not found.skips:
        parts.append(found.why_none())
    else:
        parts.append("next: tries again as soon as a provider may be tried")
    return "; ".join(parts)


def unservable_of(
    fleet: Fleet,
    scale_set: str,
    cancel_after: float,
    silent_since: Mapping[str, float],
    errors: Mapping[str, str],
) -> Unservable | None:
    """The scale set's providers when none can ever take its runner: each one's last refusal
    was INVALID, or it does not answer (``silent_since``: when each provider not answering
    was first seen so; ``errors``: why). None as soon as one provider may yet take it."""
    config = fleet.scale_sets.get(scale_set)
    if config is None or not config.providers:
        return None
    why: list[str] = []
    since = 0.0
    for entry in config.providers:
        backoff = fleet.backoff(scale_set, entry.name)
        if entry.name in silent_since:
            why.append(cannot_be_reached(entry.name, errors.get(entry.name, "")))
            since = max(since, silent_since[entry.name])
        elif backoff is not None and backoff.invalid:
            why.append(refuses_as_invalid(entry.name, backoff.last_error))
        else:
            return None
    return Unservable(tuple(why), since, cancel_after)
