"""Partitions between ``rungar serve`` and what it talks to, through the real processes: a
``runnerd serve`` host over TCP and the GitHub emulator, each behind a fault proxy
(:mod:`rungar.testing.fault_proxy`, tests/e2e/partition_stack.py) while a steady job load runs.

After the link heals: every job completes, no runner is created twice, nothing is left (no
runner in the daemon, none on runnerd, no registration on GitHub), and no runner the daemon
removed, or whose create it gave up on, is adopted back. During each fault ``rungar status``
names it in words.

``make test`` runs one short stack through a few seconds of each fault in turn (a partition
from runnerd, a drip and a reset of that link, a partition from GitHub and a reset of that
link); ``make test-long`` runs 90 s partitions from each under a 34-job load.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from rungar.testing.fault_proxy import FaultProxy, Mode
from tests.e2e.partition_stack import (
    PartitionStack,
    adopted,
    duplicates,
    given_up,
    left_behind,
    readopted,
    run_load,
)
from tests.waiting import until, until_awaited

# The daemon's waits, short: a List of runnerd that gets no answer within 1 s makes it
# unreachable; GitHub is asked to confirm the lease every second.
SHORT_TIMING = {
    "reconcile_interval": "5s",
    "backoff_first": "1s",
    "backoff_max": "2s",
    "provider_timeout": "1s",
    "probe_interval": "1s",
    "delete_timeout": "5s",
    "lease_renew_interval": "1s",
}
LONG_TIMING = {**SHORT_TIMING, "provider_timeout": "10s", "lease_renew_interval": "10s"}

# What rungar status says: the provider's line with what went unanswered, and the Role line.
RUNNERD_DOWN = "host1 cannot be reached: "
GITHUB_DOWN = "GitHub does not answer: the lease renewal timed out after"
SCALE_SET_DOWN = (
    "GitHub does not answer; trying again for the message session: the lease renewal timed "
    "out after"
)
GITHUB_REFUSED = "GitHub does not answer: "  # then the HTTP client's words for the reset


async def settle_and_check(stack: PartitionStack, seconds: float) -> list[dict[str, Any]]:
    """Every job completes, everything drains; no runner created twice, none removed (or whose
    create was given up on) and then adopted back."""
    await until(stack.jobs_done, "every job to complete", seconds)
    await until_awaited(stack.drained, "every runner, machine and registration to go", seconds)
    events = stack.events()
    assert duplicates(events) == {}, "no runner created twice"
    assert readopted(events, given_up(stack)) == [], "no runner let go of and adopted back"
    return events


async def fault(
    stack: PartitionStack,
    proxy: FaultProxy,
    mode: Mode,
    words: str,
    seconds: float,
    **settings: Any,
) -> str:
    """``mode`` on ``proxy`` for at least ``seconds`` and until ``rungar status`` says ``words``,
    then pass again until status no longer names the fault; returns what status said."""
    started = time.monotonic()
    proxy.set_mode(mode, **settings)
    # A reconcile pass now lists runnerd through the fault, rather than waiting for the next
    # interval's (the admin socket is not behind the proxy).
    nudges = [stack.world.reconcile()] if proxy is stack.to_runnerd else []
    nudge = asyncio.gather(*nudges, return_exceptions=True)

    async def said() -> str:
        shown = (await stack.world.rungar("status")).stdout
        return shown if words in shown else ""

    try:
        shown = await until_awaited(said, f"status to say {words!r}", max(seconds, 60), every=0.5)
        left = seconds - (time.monotonic() - started)
        if left > 0:
            await asyncio.sleep(left)  # the fault's length: the scenario, not a wait
    finally:
        proxy.set_mode(Mode.PASS)
        await nudge

    async def healed() -> bool:
        status = await stack.world.status()
        if status is None:
            return False
        if proxy is stack.to_runnerd:
            return all(p["state"] != "unreachable" for p in status["providers"])
        return not status["daemon"]["lease"]["unconfirmed_why"]

    await until_awaited(healed, "status to stop naming the fault once the link healed")
    return shown


def created_count(stack: PartitionStack) -> int:
    return sum(e["action"] == "created" for e in stack.events())


@pytest.fixture
async def short_stack() -> AsyncIterator[PartitionStack]:
    made = PartitionStack(max_runners=4, clock_factor=10, timing=SHORT_TIMING)
    try:
        await made.start()
        yield made
    finally:
        await made.stop()


async def test_partitions_resets_and_a_drip_heal_with_every_job_done_and_nothing_left(
    short_stack: PartitionStack,
) -> None:
    stack = short_stack
    assert stack.to_github is not None
    load = asyncio.create_task(run_load(stack, jobs=10, every=0.5, seconds=10))
    try:
        await until(lambda: stack.world.emulator.state.runners, "a runner registered")
        shown = await fault(stack, stack.to_runnerd, Mode.BLACKHOLE, RUNNERD_DOWN, 1)
        assert "List timed out after 1 s" in shown
        # A drip while jobs come: runners are created through it, a few bytes at a time.
        created = created_count(stack)
        stack.to_runnerd.set_mode(Mode.DRIP, drip_bytes=64, drip_every=0.01)
        await stack.queue("job-in-the-drip", 10)  # one comes now, however far the load got
        await until(lambda: created_count(stack) > created, "a runner created through the drip")
        stack.to_runnerd.set_mode(Mode.PASS)
        # The reason is gRPC's: "… Connection reset by peer", "Socket closed", by the moment.
        await fault(stack, stack.to_runnerd, Mode.RESET, RUNNERD_DOWN, 0.5)
        assert stack.to_runnerd.counts.reset >= 1
        shown = await fault(stack, stack.to_github, Mode.BLACKHOLE, f"{GITHUB_DOWN} 1 s", 1)
        assert f"ci: {SCALE_SET_DOWN} 1 s" in shown
        await fault(stack, stack.to_github, Mode.RESET, GITHUB_REFUSED, 0.5)
        assert stack.to_github.counts.reset >= 1
        await load
    finally:
        load.cancel()
    events = await settle_and_check(stack, 120)
    assert adopted(events) == [], "nothing adopted: the daemon never forgot a runner"


@pytest.fixture
async def long_stack() -> AsyncIterator[PartitionStack]:
    made = PartitionStack(max_runners=6, clock_factor=1, timing=LONG_TIMING)
    try:
        await made.start()
        yield made
    finally:
        await made.stop()


PARTITION = 90.0
LONG_JOBS = 34


@pytest.mark.long
@pytest.mark.parametrize("link", ["runnerd", "github"])
async def test_a_90_s_partition_under_a_34_job_load_heals_with_every_job_done(
    long_stack: PartitionStack, link: str
) -> None:
    stack = long_stack
    proxy = stack.to_runnerd if link == "runnerd" else stack.to_github
    assert proxy is not None
    # 34 jobs of 10 s, one every 4 s: the partition begins 20 s in and ends 110 s in, and jobs
    # keep coming for 20 s after it.
    load = asyncio.create_task(run_load(stack, jobs=LONG_JOBS, every=4.0, seconds=10))
    try:
        await until(lambda: len(stack.world.emulator.state.jobs) >= 5, "the load under way")
        words = RUNNERD_DOWN if link == "runnerd" else f"{GITHUB_DOWN} 10 s"
        shown = await fault(stack, proxy, Mode.BLACKHOLE, words, PARTITION)
        assert "timed out after" in shown
        await load
    finally:
        load.cancel()
    events = await settle_and_check(stack, 300)
    # A Create sent in the partition may run out of start_timeout and be given up on (its
    # Delete unanswered too), yet reach runnerd once the link heals: the machine it makes is
    # deleted as left behind, never adopted.
    assert set(left_behind(events)) <= given_up(stack)
    if link == "runnerd":
        assert adopted(events) == [], "nothing adopted: the daemon never forgot a runner"
