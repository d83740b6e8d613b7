"""Signed ``workflow_job`` deliveries through a running ``rungar serve`` (docs/github.md).

The emulator sends its deliveries over real HTTP to the daemon's receiver. What proves a
delivery was taken is read from outside the process, as an operator would: the
``rungar_webhook_deliveries_total`` counter and the reconcile pass count on ``/metrics``, and the
``webhook.job_queued`` lines of the daemon's log. The reconcile interval is an hour, so after the
pass at start-up only a wake runs another one: the listener's messages scale a scale set without
a pass, and nothing else in these tests wakes the loop.
"""

from __future__ import annotations

import json
import secrets
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from rungar.testing.fake_provider import GIB, FakeProvider
from tests.e2e.daemon_world import DaemonWorld, sample_key
from tests.waiting import WAIT

SECRET = "whsec-e2e-" + secrets.token_hex(12)
ACCEPTED = sample_key("rungar_webhook_deliveries_total", {"outcome": "accepted"})
BAD_SIGNATURE = sample_key("rungar_webhook_deliveries_total", {"outcome": "bad_signature"})
PASSES = "rungar_reconcile_duration_seconds_count"


def fleet() -> dict[str, Any]:
    return {
        "version": 1,
        "timing": {"reconcile_interval": "1h"},
        "providers": [
            {"name": "host", "type": "runnerd", "runner": {"vcpus": 2, "memory": "1GiB"}},
        ],
        "scale_sets": [
            {
                "name": "linux",
                "labels": ["linux"],
                "max_runners": 4,
                "start_timeout": "30s",
                "providers": ["host"],
            },
        ],
    }


@pytest.fixture
async def world() -> Any:
    # A short path of its own: unix socket paths are limited to 103 characters.
    root = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))
    w = DaemonWorld(
        root,
        {"host": FakeProvider("host", vcpus=64, memory_bytes=128 * GIB)},
        metrics=True,
        webhook_secret=SECRET,
    )
    await w.start(fleet())
    yield w
    await w.stop()
    shutil.rmtree(root, ignore_errors=True)


def answers(world: DaemonWorld, workflow_job_id: int) -> dict[str, list[int]]:
    """The HTTP statuses the daemon gave each delivery about one job, by action."""
    sender = world.emulator.webhooks
    assert sender is not None
    found: dict[str, list[int]] = {}
    # Copied in one step: the emulator's thread adds deliveries as jobs move.
    for delivery in dict(sender.deliveries).values():
        payload = json.loads(delivery.body)
        if payload["workflow_job"]["id"] == workflow_job_id:
            found[payload["action"]] = list(delivery.statuses)
    return found


def queued_lines(world: DaemonWorld) -> dict[int, list[str]]:
    """The scale sets each queued delivery the daemon accepted woke, by workflow job id."""
    return {
        line["job_id"]: line["scale_sets"]
        for line in world.log_lines()
        if line.get("event") == "webhook.job_queued"
    }


def listening(status: dict[str, Any] | None) -> bool:
    return status is not None and status["scale_sets"][0]["status"] == "LISTENING"


def assert_secret_never_logged(world: DaemonWorld) -> None:
    assert any(line.get("event") == "daemon.started" for line in world.log_lines())
    assert SECRET not in (world.root / "daemon.log").read_text()
    assert SECRET not in (world.root / "state" / "events.jsonl").read_text()


async def test_a_signed_queued_delivery_is_accepted_and_wakes_only_the_scale_set_it_matches(
    world: DaemonWorld,
) -> None:
    await world.wait_for(listening, "LISTENING", WAIT)
    # A wake during a pass is dropped when the pass ends, so the hints wait for the first one.
    metrics = await world.wait_for_metrics(lambda m: m.get(PASSES, 0) >= 1, "the first pass", 30)
    assert metrics[PASSES] == 1
    assert metrics.get(ACCEPTED, 0) == 0

    stray = (await world.queue_job(labels=["self-hosted", "windows"], name="stray"))[
        "workflowJobId"
    ]
    await world.wait_for_metrics(
        lambda m: bool(answers(world, stray).get("queued")), "the stray job's delivery", 20
    )
    assert answers(world, stray)["queued"] == [202]

    job = (await world.queue_job(labels=["self-hosted", "linux"], name="build", duration=600))[
        "workflowJobId"
    ]
    metrics = await world.wait_for_metrics(
        lambda m: bool(answers(world, job).get("queued")) and m.get(PASSES, 0) >= 2,
        "the linux job's delivery to wake a reconcile pass",
        20,
    )
    assert answers(world, job)["queued"] == [202]
    assert metrics.get(ACCEPTED, 0) >= 2  # the runner taking the job may have sent in_progress
    assert metrics.get(BAD_SIGNATURE, 0) == 0
    assert queued_lines(world) == {stray: [], job: ["linux"]}

    # The listener, not the hint, makes the runner; by then a wake by the stray job would show.
    await world.wait_for(lambda s: s and len(s["runners"]) == 1, "the job's runner", WAIT)
    assert (await world.scrape())[PASSES] == 2
    assert_secret_never_logged(world)


async def test_a_wrongly_signed_delivery_is_refused_counted_and_disturbs_no_running_runner(
    world: DaemonWorld,
) -> None:
    sender = world.emulator.webhooks
    assert sender is not None
    await world.wait_for(listening, "LISTENING", WAIT)
    await world.wait_for_metrics(lambda m: m.get(PASSES, 0) >= 1, "the first pass", 30)
    first = (await world.queue_job(labels=["linux"], name="long", duration=600))["workflowJobId"]
    status = await world.wait_for(
        lambda s: s and [r["state"] for r in s["runners"]] == ["busy"], "a busy runner", 30
    )
    busy = status["runners"][0]["name"]
    # Its in_progress delivery goes out rightly signed before the signatures go wrong.
    before = await world.wait_for_metrics(
        lambda m: bool(answers(world, first).get("in_progress")) and m.get(PASSES, 0) >= 2,
        "in_progress answered and the pass the queued delivery woke",
        20,
    )
    assert answers(world, first) == {"queued": [202], "in_progress": [202]}
    assert before[PASSES] == 2

    sender.wrong_signature = True
    forged = (await world.queue_job(labels=["linux"], name="forged", duration=600))["workflowJobId"]
    # Counted before it is answered, so counted by the time the emulator has its answer.
    metrics = await world.wait_for_metrics(
        lambda m: bool(answers(world, forged).get("queued")), "the forged delivery's answer", 20
    )
    assert answers(world, forged)["queued"] == [401]
    assert metrics.get(BAD_SIGNATURE, 0) >= 1  # the forged job's in_progress may be refused too
    assert metrics[ACCEPTED] == before[ACCEPTED]
    assert forged not in queued_lines(world)

    # Webhooks are only hints: the listener still gets the forged job a runner of its own.
    status = await world.wait_for(
        lambda s: s and len(s["runners"]) == 2, "the second job's runner", 30
    )
    runners = {r["name"]: r for r in status["runners"]}
    assert runners[busy]["state"] == "busy"
    assert busy in world.machines()
    assert world.providers["host"].runners[busy].poll() is None, "its runner process still runs"
    human = await world.rungar("status")
    assert human.returncode == 0 and busy in human.stdout
    metrics = await world.scrape()
    assert metrics[PASSES] == before[PASSES], "a refused delivery wakes nothing"
    assert metrics[ACCEPTED] == before[ACCEPTED]
    assert_secret_never_logged(world)
