"""When room is expected for a runner refused as FULL (docs/admission.md, "When room comes back").

Pure: the running runners' predicted ends come in, and :func:`expected_room` answers the earliest
moment at which enough of them have ended for :func:`~runnerd.admission.admit.decide` to admit
the refused runner, and how sure that is. A running job's end is predicted from its own past
durations (its profile's when it has fewer than :data:`MIN_DURATIONS`), given how long it has
run already: the :data:`QUANTILE` of the durations longer than that. A runner without a job has
no predicted end and is never counted as ending; a job that has outrun every duration known is
predicted to end now, as likely as not (:data:`OVERDUE`).

How sure: for the end of any one of several runners, the chance that at least one of them has
ended by then (the moment is the first at which it reaches :data:`QUANTILE`, else the surest
moment, with how sure it is); for several that must all end, the product of the share of each
one's past durations longer than what it has run that ended by then.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from runnerd.admission.admit import decide
from runnerd.admission.model import (
    Admit,
    Candidate,
    GuardState,
    HostReading,
    Limits,
    Running,
    SliceReading,
)

MIN_DURATIONS = 3  # a job's own durations needed before its profile's are not used instead
DURATIONS_KEPT = 20  # the last durations a prediction reads
QUANTILE = 0.75  # the predicted end: this share of the past durations longer than its run so far
OVERDUE = 0.5  # how sure a job that has outrun every duration known ends any moment now


@dataclass(frozen=True, slots=True)
class PredictedEnd:
    """A running runner's predicted end (epoch seconds), with what it was read from: when its
    job started, how long it had run, and the past durations, for how sure a later moment is."""

    at: float
    started: float
    ran: float
    durations: tuple[float, ...]

    def ended_by(self, moment: float) -> float:
        """The share of its durations longer than its run so far that end by ``moment``; for a
        job that has run longer than all of them, :data:`OVERDUE` from its prediction on."""
        longer = [d for d in self.durations if d > self.ran]
        if not longer:
            return OVERDUE if moment >= self.at else 0.0
        return sum(1 for d in longer if d <= moment - self.started) / len(longer)


def _quantile(values: Sequence[float]) -> float:
    ordered = sorted(values)
    index = max(0, math.ceil(QUANTILE * len(ordered)) - 1)
    return ordered[index]


def predicted_end(durations: Sequence[float], started: float, now: float) -> PredictedEnd | None:
    """A job started at ``started``, with these past durations: when it is predicted to end,
    or None when nothing known says (no durations). A job that has run longer than all of them
    is predicted to end now, as likely as not (:data:`OVERDUE`)."""
    if not durations:
        return None
    ran = max(0.0, now - started)
    longer = [d for d in durations if d > ran]
    at = started + _quantile(longer) if longer else now
    return PredictedEnd(at, started, ran, tuple(durations))


@dataclass(frozen=True, slots=True)
class Expected:
    """Room expected ``seconds`` from now, as sure as ``confidence`` (0..1)."""

    seconds: float
    confidence: float


def expected_room(
    candidate: Candidate,
    running: Sequence[Running],
    ends: Mapping[str, PredictedEnd],
    slice_reading: SliceReading | None,
    host_reading: HostReading | None,
    disk_free: int | None,
    limits: Limits,
    state: GuardState,
    now: float,
    *,
    sure: float = QUANTILE,
) -> Expected | None:
    """When :func:`decide` is expected to admit ``candidate``: None when no predicted end is
    enough (room not known).

    When the end of any one of several runners would do (a slot, or memory one job gives
    back), the room comes with the first of them to end: the earliest moment by which, from
    their past durations, at least one of them has ended with probability ``sure``, and that
    probability. Otherwise the runners are ended in the order of their predicted ends until
    enough have; the moment is the last of those ends, and how sure is the product of each
    having ended by then."""
    views = {r.name: r for r in running}
    known = {name: end for name, end in ends.items() if name in views}
    if not known:
        return None

    def admits(gone: set[str]) -> bool:
        freed = sum(views[name].used for name in gone)
        left = [r for r in running if r.name not in gone]
        reading = (
            None
            if slice_reading is None
            else replace(slice_reading, memory=max(0, slice_reading.memory - freed))
        )
        host = (
            None
            if host_reading is None
            else replace(
                host_reading,
                available=host_reading.available + freed,
                held=max(0, host_reading.held - freed),
            )
        )
        outcome = decide(candidate, left, reading, host, disk_free, limits, state, now)
        return isinstance(outcome.decision, Admit)

    alone = [end for name, end in known.items() if admits({name})]
    if alone:
        moments = sorted(
            {end.started + d for end in alone for d in end.durations if d > end.ran}
            | {end.at for end in alone}
        )
        best: Expected | None = None
        for moment in moments:
            none_ended = 1.0
            for end in alone:
                none_ended *= 1.0 - end.ended_by(moment)
            found = Expected(max(0.0, moment - now), 1.0 - none_ended)
            if found.confidence >= sure:
                return found
            if found.confidence > 0 and (best is None or found.confidence > best.confidence):
                best = found  # never as sure as asked: the surest moment, and how sure
        return best
    gone: set[str] = set()
    for at, name in sorted((end.at, name) for name, end in known.items()):
        gone.add(name)
        if admits(gone):
            moment = max(at, now)
            confidence = 1.0
            for each in gone:
                confidence *= known[each].ended_by(moment)
            return Expected(moment - now, confidence)
    return None
