"""Why a job waits, told on GitHub, for a hundred jobs through the real processes: a
``rungar serve`` daemon authenticated as a GitHub App, the GitHub emulator, and a host over gRPC
with room for four runners at a time.

Two jobs of a first run start at once, on an empty host. Then four long jobs fill the host, and
eight jobs of two runs of a priority scale set (``big``, twice a runner's room) wait on FULL
with the host held for them, which keeps the other jobs off it; seventy-six more jobs of eight
runs queue on the host, which takes four at a time, so most of them wait on FULL; ten jobs of
two runs ask for a runner larger than the host (INVALID) and can never be served. Every run
with a job that waited well past the threshold has a check run naming the host's answer (full,
or held: the big run's says the host is held for it); no run whose jobs all started well before
it has one, nor is any commit status written; every never-servable run is cancelled within its
deadline plus a minute, its check run failed with the reason; no job that started was
cancelled; and the writes stay within their documented share of the budget (5 % an hour, a
tenth of that a minute). Registrations' pace with the writes on and off is measured by
benchmarks/job_reasons.py.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from rungar.testing.fake_provider import GIB, FakeProvider
from rungar.testing.github_emulator.model import Job, JobState, head_sha
from tests.e2e.daemon_world import DaemonWorld
from tests.github_app import app_keys
from tests.waiting import until

pytestmark = pytest.mark.long  # a minute or two of real processes

APP = "Iv1.jobreasonsburst"
REPO = "octo-org/app"
FACTOR = 10.0  # emulated seconds per real second
AFTER = 8.0  # real seconds before a waiting job's reason is written
CANCEL_AFTER = 6.0
# A job this close to the threshold may go either way: the daemon hears of an assignment and a
# start a poll after GitHub's times, and its task turns every 2 s.
ABOVE, BELOW = 3.0, 2.0
RATE_LIMIT = 15000  # the emulator's hourly REST budget, as an App's on GitHub Enterprise


def fleet() -> dict[str, Any]:
    return {
        "version": 1,
        "timing": {"reconcile_interval": "5s", "backoff_first": "1s", "left_grace": "1s"},
        "providers": [
            {"name": "host", "type": "runnerd", "runner": {"vcpus": 1, "memory": "1GiB"}},
        ],
        "scale_sets": [
            {
                "name": "linux",
                "labels": ["linux"],
                "max_runners": 20,
                "providers": ["host"],
                "unservable": {"cancel_after": CANCEL_AFTER},
            },
            {
                "name": "big",
                "labels": ["big"],
                "max_runners": 2,
                "priority": 10,
                "providers": [{"name": "host", "runner": {"vcpus": 2, "memory": "2GiB"}}],
                "unservable": {"cancel_after": CANCEL_AFTER},
            },
            {
                "name": "huge",
                "labels": ["huge"],
                "max_runners": 5,
                "providers": [{"name": "host", "runner": {"vcpus": 8, "memory": "1GiB"}}],
                "unservable": {"cancel_after": CANCEL_AFTER},
            },
        ],
        "job_reasons": {"enabled": True, "after": AFTER, "update_every": "8s"},
    }


@pytest.fixture
async def world() -> AsyncIterator[DaemonWorld]:
    root = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))
    private, public = app_keys()
    w = DaemonWorld(
        root,
        {"host": FakeProvider("host", vcpus=4, memory_bytes=4 * GIB)},
        clock_factor=FACTOR,
        app_private_key=private,
        emulator_options={"apps": {APP: public}, "rate_limit": RATE_LIMIT},
    )
    await w.start(fleet())
    yield w
    await w.stop()
    shutil.rmtree(root, ignore_errors=True)


# A provider's answer in a reason: "linux found host full", "host: held for scale set big",
# "host held for big (priority 10)".
ANSWER = re.compile(r"found host full|host: held for scale set big|host held for big")


def summaries(requests: list[dict[str, Any]], check_runs: dict[int, Any]) -> dict[int, list[str]]:
    """Every summary written to each check run, by its id, in order: the emulator keeps only the
    last one, its record of the calls keeps them all."""
    ids = {(c["name"], c["head_sha"]): check_id for check_id, c in check_runs.items()}
    written: dict[int, list[str]] = {check_id: [] for check_id in check_runs}
    for request in requests:
        if request["route"] not in ("R9", "R10") or request["status"] not in (200, 201):
            continue
        body = json.loads(request["body"])
        if request["route"] == "R9":
            check_id = ids[(body["name"], body["head_sha"])]
        else:
            check_id = int(request["path"].rsplit("/", 1)[1])
        if "output" in body:
            written[check_id].append(body["output"]["summary"])
    return written


def waited(job: Job) -> float:
    """Real seconds from its assignment until a runner took it (or until now, still waiting)."""
    end = job.started_at if job.started_at else job.finished_at
    return (end - job.assigned_at) / FACTOR


async def test_a_hundred_jobs_waiting_on_full_and_invalid_are_told_and_ended_within_budget(
    world: DaemonWorld,
) -> None:
    await world.wait_for(
        lambda s: s and all(x["status"] == "LISTENING" for x in s["scale_sets"]), "up", 60
    )
    started = time.monotonic()
    quick = [await world.queue_job(labels=["linux"], name=f"q{n}", run_id=99) for n in range(2)]
    state = world.emulator.state
    await until(
        lambda: all(state.jobs[j["jobId"]].started_at for j in quick), "the first run started"
    )
    # The first four jobs of run 100 fill the host for a while; the big jobs queued once they
    # run wait on it, held for them, which keeps the other jobs off it.
    long = [
        await world.queue_job(labels=["linux"], name=f"j{n}", duration=200, run_id=100)
        for n in range(4)
    ]
    await until(lambda: all(state.jobs[j["jobId"]].started_at for j in long), "the long jobs")
    for run in range(2):
        for n in range(4):
            await world.queue_job(labels=["big"], name=f"b{n}", duration=20, run_id=800 + run)
    for run in range(8):
        for n in range(4 if run == 0 else 0, 10):
            await world.queue_job(labels=["linux"], name=f"j{n}", duration=20, run_id=100 + run)
    for run in range(2):
        for n in range(5):
            await world.queue_job(labels=["huge"], name=f"h{n}", duration=20, run_id=900 + run)

    def all_ended() -> bool:
        return all(j.state is JobState.COMPLETED for j in state.jobs.values())

    await until(all_ended, "every job to end", 300)
    assert len(state.jobs) == 100
    book = state.checks
    runs: dict[int, list[Job]] = defaultdict(list)
    for job in state.jobs.values():
        runs[job.run_id].append(job)
    written = summaries(state.requests, book.check_runs)
    by_head = {(c["name"], c["head_sha"]): c for c in book.check_runs.values()}
    told = quiet = 0
    for run_id, name in (
        [(99, "linux")]
        + [(100 + r, "linux") for r in range(8)]
        + [
            (800, "big"),
            (801, "big"),
        ]
    ):
        jobs = runs[run_id]
        assert all(j.result != "canceled" for j in jobs), run_id  # none of them was cancelled
        check = by_head.get((f"rungar: {name}", head_sha(REPO, run_id)))
        if max(waited(j) for j in jobs) > AFTER + ABOVE:
            assert check is not None, run_id
            assert check["conclusion"] == "neutral", check
            # What it said while its jobs waited names the host's answer: full, or held.
            assert any(ANSWER.search(text) for text in written[check["id"]]), written[check["id"]]
            told += 1
        if max(waited(j) for j in jobs) < AFTER - BELOW:
            assert check is None, run_id
            quiet += 1
    assert told >= 3  # four runners at a time: the later runs waited
    assert quiet >= 1  # the first run started at once: nothing was written for it
    assert book.statuses == []  # an App writes check runs, never a commit status
    # The priority scale set's jobs held the host: their check run said so while they waited.
    (big,) = [c for c in book.check_runs.values() if c["head_sha"] == head_sha(REPO, 800)]
    assert any("host held for big (priority 10)" in text for text in written[big["id"]]), written
    cancelled = {c["run_id"]: c["at"] for c in book.cancelled_runs}
    assert sorted(cancelled) == [900, 901]
    for run_id in (900, 901):
        first = min(j.assigned_at for j in runs[run_id])
        assert (cancelled[run_id] - first) / FACTOR < CANCEL_AFTER + 60
        assert all(j.result == "canceled" and not j.started_at for j in runs[run_id])
        check = by_head[("rungar: huge", head_sha(REPO, run_id))]
        assert check["conclusion"] == "failure", check
        assert "host refuses its runner as invalid" in check["output"]["summary"], check
    # No job that started was cancelled, whichever scale set it was of.
    assert not [j.job_id for j in state.jobs.values() if j.started_at and j.result == "canceled"]
    # The writes' share: 5 % of the hour's budget, a tenth of that in any minute.
    writes = [r for r in state.requests if r["route"] in ("R8", "R9", "R10", "R11", "R12")]
    assert len(writes) <= RATE_LIMIT * 5 // 100
    elapsed = time.monotonic() - started
    per_minute = RATE_LIMIT * 5 // 100 // 10
    assert len(writes) <= per_minute * (elapsed / 60 + 1), (len(writes), elapsed)
    assert len([r for r in writes if r["route"] == "R8"]) <= 11  # each run's head, once
