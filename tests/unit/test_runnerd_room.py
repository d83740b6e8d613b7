"""When runnerd expects room for a runner it refused: its running jobs' predicted ends, from
their past durations (runnerd.admission.room), as a FULL refusal's ``room``."""

from __future__ import annotations

import pytest
from runnerd.admission import GuardState
from runnerd.admission.model import SUCCESS, Candidate, Limits, Prediction, Running
from runnerd.admission.room import PredictedEnd, expected_room, predicted_end
from runnerd.history import History, JobEnd, JobKey, JobStart
from runnerd.provider import RunnerdProvider
from runnerd.runtime.base import Usage

from rungar.model.machine import JobHint, Refusal, RefusalKind, RoomExpected
from rungar.testing.clock import FakeClock
from tests.unit.test_runnerd_provider import FakeRuntime, request, setup

__all__ = ["setup"]  # the provider on a fake runtime and clock, shared with its own tests

G = 1024**3
JOB = JobKey("jvm", "octo/app", "ci", "build")


def test_a_jobs_end_is_its_durations_quantile_among_those_longer_than_its_run_so_far() -> None:
    durations = [100.0, 200.0, 300.0, 400.0]
    assert predicted_end(durations, started=1000.0, now=1000.0).at == 1300.0  # type: ignore[union-attr]  # known
    later = predicted_end(durations, started=1000.0, now=1250.0)  # ran 250: 300 or 400 left
    assert later is not None and later.at == 1400.0
    assert later.ended_by(1300.0) == 0.5 and later.ended_by(1400.0) == 1.0
    overdue = predicted_end(durations, started=1000.0, now=1500.0)  # outran them all
    assert overdue is not None and overdue.at == 1500.0, "due now"
    assert (overdue.ended_by(1499.0), overdue.ended_by(1500.0)) == (0.0, 0.5), "as not"
    assert predicted_end([], started=1000.0, now=1000.0) is None


def slot_candidate() -> Candidate:
    return Candidate("c", "jvm", "s", 14 * G, 8.0, 0, 2, Prediction(14 * G, 8.0, "cap"))


def running(name: str) -> Running:
    return Running(name, "jvm", "s", 14 * G, 8.0, 14 * G, 8.0)


def test_room_for_a_slot_comes_with_the_first_of_its_holders_to_end() -> None:
    ends = {
        "a": PredictedEnd(1600.0, 1000.0, 0.0, (300.0, 600.0, 900.0)),
        "b": PredictedEnd(1600.0, 1000.0, 0.0, (300.0, 600.0, 900.0)),
    }
    limits = Limits()  # caps: two slots of jvm are what is short
    found = expected_room(
        slot_candidate(), [running("a"), running("b")], ends, None, None, None, limits,
        GuardState(), 1100.0,
    )  # fmt: skip
    # at 300 s each has ended with 1/3: one of two, 5/9 < 0.75; at 600 s, 8/9
    assert found is not None and found.seconds == 500.0
    assert found.confidence == pytest.approx(8 / 9)
    only_a = {"a": ends["a"]}  # b's end not known: a alone must end
    alone = expected_room(
        slot_candidate(), [running("a"), running("b")], only_a, None, None, None, limits,
        GuardState(), 1100.0,
    )  # fmt: skip
    assert alone is not None and (alone.seconds, alone.confidence) == (800.0, 1.0)
    unknown = expected_room(
        slot_candidate(), [running("a"), running("b")], {}, None, None, None, limits,
        GuardState(), 1100.0,
    )  # fmt: skip
    assert unknown is None


def seed_durations(history: History, now: float, durations: list[float]) -> None:
    rows = []
    for i, seconds in enumerate(durations):
        started = now - 86400 + i * 3600
        start = JobStart("old", "jvm", "jvm", 14 * G, 8.0, "caps", 14 * G, 8.0, "", None, None,
                         started)  # fmt: skip
        end = JobEnd(SUCCESS, 4 * G, 0.5, False, False, None, started + seconds)
        rows.append((start, JOB, end))
    history.insert_finished(rows)


async def test_runnerd_says_when_room_is_expected_when_it_refuses_for_slots(
    setup: tuple[RunnerdProvider, FakeRuntime, FakeClock],
) -> None:
    provider, runtime, clock = setup
    seed_durations(provider.history, clock.now(), [300.0, 600.0, 900.0])
    hint = JobHint("octo/app", "ci", "build", "1")
    for name in ("a", "b"):
        await provider.create(request(name, scale_set="jvm"))
        await provider.update_runner(name, hint)  # both took the job now
        runtime.usage[name] = Usage(memory=4 * G, held=0, cpu_seconds=0.0)
    clock.set(clock.now() + 100)
    refused = await provider.create(request("c", scale_set="jvm"))
    assert isinstance(refused, Refusal) and refused.kind is RefusalKind.FULL
    assert refused.resource == "slots"
    assert refused.room == RoomExpected(500.0, round(8 / 9, 3))


async def test_runnerd_says_nothing_of_when_while_its_runners_have_no_job(
    setup: tuple[RunnerdProvider, FakeRuntime, FakeClock],
) -> None:
    provider, _, clock = setup
    seed_durations(provider.history, clock.now(), [300.0, 600.0, 900.0])
    for name in ("a", "b"):
        await provider.create(request(name, scale_set="jvm"))
    refused = await provider.create(request("c", scale_set="jvm"))
    assert isinstance(refused, Refusal) and refused.kind is RefusalKind.FULL
    assert refused.room is None
