"""How many runners a warm pool keeps ready: a pure function of the scale set's job history
and the clock (docs/scale-sets.md, "Warm pool").

The prediction is deliberately simple, so ``status`` can say it in one line:

    the p90 of the jobs assigned in the same 15-minute slot of the day, on the last 5 days
    of the same kind (weekdays Monday to Friday, or weekend days), less the jobs assigned in
    the slot today so far, at most ``warm_pool.max``.

Less the jobs that came: the pool is for the jobs the slot is predicted to bring that have
not been assigned yet. A job that takes a warm runner is not replaced by another warm one
once the slot's predicted jobs have all come, so a rush costs one runner per job, not two.

Days of the same kind, because a Saturday morning says little about a Monday morning, while
last Friday's 08:15 says a lot about today's. A day with no job in the slot counts as 0, so a
burst seen once in five days does not keep runners warm every day (p90 of five days is their
highest only when one day in five is enough; set ``percentile`` lower to ask for more). The
slot looked at is the one in force now and the one ``ahead`` from now, whichever predicts more,
so a slot's runners have booted when it opens. Slots are wall-clock times in the pool's
timezone: 08:15 stays 08:15 across a daylight-saving change.

``history`` is each job's assignment time (epoch seconds), sorted: the caller keeps it (the
daemon in its state database, ``rungar simulate`` in memory); this module only reads it.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from rungar.config.model import ScaleSetConfig, WarmPool

DAY = 86400.0
WEEKEND = (5, 6)  # Saturday, Sunday


@dataclass(frozen=True, slots=True)
class Warm:
    """The warm pool's size now, and why: ``predicted`` jobs at ``slot`` (``HH:MM``) as the
    ``percentile`` of ``counts`` on the last ``len(counts)`` days of ``kind``."""

    runners: int  # the prediction, at most warm_pool.max
    predicted: int
    slot: str
    kind: str  # "weekdays" or "weekend days"
    percentile: int
    counts: tuple[int, ...]  # jobs in the slot on each day looked at, newest first
    most: int  # warm_pool.max
    come: int = 0  # jobs assigned in the slot today so far: they need no warm runner any more

    @property
    def reason(self) -> str:
        """``p90 of 3 jobs at 08:15 on the last 5 weekdays`` (the percentile is 3 jobs), and
        ``, 1 assigned so far`` once some of them came."""
        jobs = "job" if self.predicted == 1 else "jobs"
        text = (
            f"p{self.percentile} of {self.predicted} {jobs} at {self.slot} on the last "
            f"{len(self.counts)} {self.kind}"
        )
        if self.come:
            text += f", {self.come} assigned so far"
        if self.predicted - self.come > self.most:
            text += f", at most warm_pool.max {self.most}"
        return text


def zone_of(config: ScaleSetConfig) -> ZoneInfo:
    """The pool's own timezone, else its schedule's, else UTC."""
    pool = config.warm_pool
    if pool is not None and pool.timezone:
        return ZoneInfo(pool.timezone)
    if config.schedule is not None:
        return ZoneInfo(config.schedule.timezone)
    return ZoneInfo("UTC")


def nearest_rank(values: Sequence[int], percentile: int) -> int:
    if not values:
        return 0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(percentile / 100 * len(ordered)) - 1)]


def _is_weekend(day: date) -> bool:
    return day.weekday() in WEEKEND


def _days_like(day: date, lookback: int) -> list[date]:
    """The ``lookback`` days before ``day`` of its kind, newest first."""
    found: list[date] = []
    other = day
    while len(found) < lookback:
        other -= timedelta(days=1)
        if _is_weekend(other) == _is_weekend(day):
            found.append(other)
    return found


def _slot_prediction(
    pool: WarmPool, zone: ZoneInfo, history: Sequence[float], at: float, now: float
) -> Warm:
    """The prediction for the slot ``at`` falls in, less the jobs assigned in it by ``now``."""
    local = datetime.fromtimestamp(at, zone)
    slot_minutes = max(1, round(pool.slot / 60))
    start_minute = (local.hour * 60 + local.minute) // slot_minutes * slot_minutes
    counts = []
    for day in (local.date(), *_days_like(local.date(), pool.lookback)):
        opens = datetime(day.year, day.month, day.day, tzinfo=zone) + timedelta(
            minutes=start_minute
        )
        closes = opens + timedelta(minutes=slot_minutes)  # wall-clock arithmetic, as schedules
        first = bisect_left(history, opens.timestamp())
        last = bisect_left(history, min(closes.timestamp(), now + 1e-6), lo=first)
        counts.append(max(0, last - first))
    come, counts = counts[0], counts[1:]
    predicted = nearest_rank(counts, pool.percentile)
    return Warm(
        runners=min(max(0, predicted - come), pool.max),
        predicted=predicted,
        slot=f"{start_minute // 60:02d}:{start_minute % 60:02d}",
        kind="weekend days" if _is_weekend(local.date()) else "weekdays",
        percentile=pool.percentile,
        counts=tuple(counts),
        most=pool.max,
        come=come,
    )


def predict(config: ScaleSetConfig, history: Sequence[float], now: float) -> Warm | None:
    """The scale set's warm pool at ``now``; None when it has none."""
    pool = config.warm_pool
    if pool is None:
        return None
    zone = zone_of(config)
    best = _slot_prediction(pool, zone, history, now, now)
    if pool.ahead > 0:
        later = _slot_prediction(pool, zone, history, now + pool.ahead, now)
        if later.runners > best.runners:
            best = later
    return best


def history_span(pool: WarmPool | None) -> float:
    """How far back a prediction looks at most (seconds): ``lookback`` weekend days span the
    most calendar days (two a week), plus today. The history kept needs no more."""
    lookback = (pool or WarmPool(max=1)).lookback
    return (math.ceil(lookback / 2) * 7 + 2) * DAY
