"""Active and standby in one process: two engines of one installation (each with its own state
database, as on two machines) over the same fake GitHub and fake providers, on a fake clock.

A standby daemon does not act: its engine refuses everything (create, remove, adopt, sweep,
settle) whatever its inputs say; the new active one adopts what exists before it creates, so no
runner is created twice. Breaking either guard (``ActingGuard.acting`` returning True, or
``may_create`` ignoring the adoption pass) fails these tests.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rungar.config.model import (
    ProviderConfig,
    ScaleSetConfig,
    ScaleSetProvider,
    ScaleSetsFile,
    Timing,
)
from rungar.daemon.control import Control
from rungar.daemon.lease import LeaseKeeper
from rungar.engine.core.naming import runner_name
from rungar.engine.core.records import RunnerRecord
from rungar.engine.engine import Engine
from rungar.engine.report.events import EventLog
from rungar.errors import Busy, GitHubError
from rungar.github.exceptions import GitHubUnreachable
from rungar.github.interface import SessionPhase
from rungar.model.phase import Phase
from rungar.model.runner import RemovalReason, RunnerState
from rungar.scaling.lease import Role
from rungar.store.sqlite import CreateIntent, SqliteStore
from rungar.testing.clock import FakeClock
from rungar.testing.fake_github import FakeGitHub
from rungar.testing.fake_provider import GIB, FakeProvider
from tests.waiting import WAIT

RUNNER = {"vcpus": 2, "memory": "4GiB"}
TIMING = Timing(reconcile_interval=30, left_grace=0, lease_duration=30, lease_renew_interval=10)


def config() -> ScaleSetsFile:
    providers = (ProviderConfig("compute1", "fake", runner=RUNNER),)
    scale_set = ScaleSetConfig(
        "linux",
        max_runners=10,
        providers=(ScaleSetProvider("compute1", RUNNER),),
        start_timeout=60,
    )
    return ScaleSetsFile(providers, (scale_set,), TIMING)


class Pair:
    """What two machines share (GitHub, the providers, the clock) and one engine per daemon."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.clock = FakeClock()
        self.github = FakeGitHub()
        self.provider = FakeProvider("compute1", vcpus=64, memory_bytes=256 * GIB, clock=self.clock)

    def engine(self, name: str) -> Engine:
        home = self.tmp_path / name
        home.mkdir()
        engine = Engine(
            config(),
            {"compute1": self.provider},
            self.github,
            clock=self.clock,
            store=SqliteStore(home / "state.db"),
            events=EventLog(self.clock, home / "events.jsonl"),
            installation="gh-test",
        )
        return engine

    def machines(self) -> list[str]:
        return sorted(m.name for m in self.provider.machines)


async def ids(engine: Engine, github: FakeGitHub) -> None:
    for state in engine.sets.values():
        state.id = await github.ensure_scale_set(state.config)


@pytest.fixture
async def pair(tmp_path: Path) -> Pair:
    return Pair(tmp_path)


async def keeper_for(engine: Engine, owner: str) -> LeaseKeeper:
    keeper = LeaseKeeper(engine.ctx, lead="linux", owner=owner)
    engine.lease = keeper
    await ids(engine, engine.github)  # type: ignore[arg-type]  # FakeGitHub in these tests
    return keeper


async def test_a_standby_pass_creates_removes_adopts_and_sweeps_nothing(pair: Pair) -> None:
    # The active daemon (alone, no lease of its own here) made two runners.
    active = pair.engine("a")
    await ids(active, pair.github)
    active.on_demand("linux", 2)
    await active.drain_tasks()
    made = pair.machines()
    assert len(made) == 2
    # The standby, GitHub telling it another owner holds the lead session, is given every
    # reason to act: untracked machines, demand, a crash's create intent, an orphan.
    standby = pair.engine("b")
    keeper = await keeper_for(standby, "host-b/2")
    pair.github.phases["linux"] = SessionPhase(Phase.WAITING, holder="host-a/1")
    await keeper.look()
    orphan = runner_name("linux")
    orphan_id, _ = await pair.github.generate_jit_config(standby.sets["linux"].id, orphan)
    standby.store.write_intent(
        CreateIntent(orphan, "linux", "req-1", created_at=pair.clock.now(), runner_id=orphan_id)
    )
    registered = set(pair.github.runners)
    calls_before = len(pair.github.calls)
    standby.on_demand("linux", 5)
    for _ in range(3):
        pair.clock.advance(61)  # past start_timeout: the orphan is ripe for a sweep
        await standby.reconcile()
        await standby.drain_tasks()
    record = RunnerRecord("linux-x", "linux", "compute1", "", pair.clock.now(), RunnerState.IDLE)
    removed = await standby.remove(record, RemovalReason.REQUESTED)

    assert keeper.document()["role"] == "standby"
    assert pair.machines() == made, "the standby created or deleted a machine"
    assert set(pair.github.runners) == registered, "the standby registered or removed one"
    acted = [c for c in pair.github.calls[calls_before:] if c[0] != "list_all_runners"]
    assert acted == [], f"the standby called GitHub to act: {acted}"
    assert len(standby.runners) == 0, "the standby adopted a machine"
    assert [i.runner for i in standby.store.intents()] == [orphan], "it settled an intent"
    assert removed is False
    assert (pair.provider.calls["create"], pair.provider.calls["delete"]) == (2, 0), (
        "only the active daemon's two creates"
    )


async def test_the_new_active_daemon_adopts_what_exists_before_creating_the_rest(
    pair: Pair,
) -> None:
    old = pair.engine("a")
    await ids(old, pair.github)
    old.on_demand("linux", 3)
    await old.drain_tasks()
    assert len(pair.machines()) == 3
    # The old active daemon is gone; GitHub confirms the new one's lead session.
    new = pair.engine("b")
    keeper = await keeper_for(new, "host-b/2")
    await keeper.look()
    assert keeper.document()["role"] == "active"
    new.on_demand("linux", 5)  # demand arrives before the adoption pass
    await new.drain_tasks()
    assert len(pair.machines()) == 3, "created before adopting: runners would be made twice"
    term = keeper.pass_begins()
    await new.reconcile()
    assert keeper.pass_ended(term)
    assert len(new.runners) == 3, "the adoption pass takes in every machine the old one left"
    await new.scale("linux")
    await new.drain_tasks()
    assert len(pair.machines()) == 5, "only what is missing is created"
    assert len(set(pair.machines())) == 5


async def test_github_naming_another_holder_makes_the_active_daemon_stand_by_and_forget(
    pair: Pair,
) -> None:
    engine = pair.engine("a")
    keeper = await keeper_for(engine, "host-a/1")
    await keeper.look()
    await engine.reconcile()
    assert keeper.pass_ended(1)
    engine.on_demand("linux", 2)
    await engine.drain_tasks()
    assert len(engine.runners) == 2
    assert engine.metrics.registry.get_sample_value("rungar_active") == 1
    pair.github.phases["linux"] = SessionPhase(
        Phase.WAITING, holder="host-b/2", holder_seen_at=pair.clock.now()
    )
    await keeper.look()
    document = keeper.document()
    assert (document["role"], document["holder"]) == ("standby", "host-b/2")
    assert len(engine.runners) == 0, "a standby tracks nothing: the active daemon does"
    assert len(pair.machines()) == 2, "its machines are left in place for the active one"
    assert engine.metrics.registry.get_sample_value("rungar_active") == 0
    actions = [(e.kind, e.action) for e in engine.events.recent()]
    assert ("daemon", "active") in actions and ("daemon", "standby") in actions


async def test_a_lease_github_stops_confirming_stops_the_daemon_acting_when_it_runs_out(
    pair: Pair,
) -> None:
    engine = pair.engine("a")
    keeper = await keeper_for(engine, "host-a/1")
    await keeper.look()
    await engine.reconcile()
    keeper.pass_ended(1)
    pair.github.renewals["linux"] = GitHubError("GitHub does not answer", 503)
    pair.clock.advance(29)
    await keeper.look()  # unanswered: the lease still holds
    engine.on_demand("linux", 1)
    await engine.drain_tasks()
    assert len(pair.machines()) == 1
    pair.clock.advance(1)  # 30 s since GitHub last confirmed it
    engine.on_demand("linux", 2)
    await engine.drain_tasks()
    assert len(pair.machines()) == 1, "created with a lease that ran out"
    await keeper.look()
    assert keeper.document()["role"] == "standby"
    assert [e.action for e in engine.events.recent() if e.kind == "daemon"][-1] == "standby"


async def test_a_lease_github_leaves_unconfirmed_says_why_until_github_answers_again(
    pair: Pair,
) -> None:
    engine = pair.engine("a")
    keeper = await keeper_for(engine, "host-a/1")
    await keeper.look()
    assert keeper.document()["unconfirmed_why"] == ""
    pair.github.renewals["linux"] = GitHubUnreachable("connection refused")
    pair.clock.advance(10)
    started = pair.clock.now()
    await keeper.look()
    pair.github.renewals["linux"] = GitHubError("Service Unavailable", 503)
    pair.clock.advance(10)
    await keeper.look()
    shown = keeper.document()
    assert shown["role"] == "active" and shown["unconfirmed_since"] == started
    assert shown["unconfirmed_why"] == "GitHub refused the lease renewal: Service Unavailable"
    assert scale_set_words(engine) == ("LISTENING", ""), "GitHub answers, with an error"
    pair.github.renewals["linux"] = GitHubUnreachable("connection refused")
    pair.clock.advance(10)  # 30 s: the lease runs out, and status says why
    await keeper.look()
    shown = keeper.document()
    assert shown["role"] == "standby" and shown["unconfirmed_since"] == started
    assert shown["unconfirmed_why"] == "GitHub does not answer: connection refused"
    # The listener's long polls see nothing wrong (a cut poll is "nothing new"); the scale set's
    # words come from the lease renewal GitHub left unanswered.
    assert scale_set_words(engine) == (
        "UNREACHABLE",
        "GitHub does not answer; trying again for the message session: connection refused",
    )
    del pair.github.renewals["linux"]
    await keeper.look()  # GitHub confirms the session again
    shown = keeper.document()
    assert shown["role"] == "active"
    assert (shown["unconfirmed_since"], shown["unconfirmed_why"]) == (None, "")
    assert scale_set_words(engine) == ("LISTENING", "")


def scale_set_words(engine: Engine) -> tuple[str, str]:
    from rungar.daemon.status import snapshot

    engine.sets["linux"].phase = Phase.LISTENING  # as its listener sets it once a session opened
    (linux,) = snapshot(engine.ctx)["scale_sets"]
    return linux["status"], linux["note"]


async def test_github_saying_the_lead_session_is_gone_ends_the_lease_at_once(pair: Pair) -> None:
    engine = pair.engine("a")
    keeper = await keeper_for(engine, "host-a/1")
    await keeper.look()
    assert keeper.acts()
    pair.github.renewals["linux"] = False
    pair.clock.advance(10)
    await keeper.look()
    assert not keeper.acts()
    assert keeper.lease.role is Role.STANDBY


async def test_a_keeper_stopped_just_as_github_answers_its_renewal_stops(pair: Pair) -> None:
    # The daemon's stop cancels the keeper once. Python 3.11's asyncio.wait_for dropped a cancel
    # that arrived once the renewal's answer was in but before the keeper ran again: the keeper
    # went on keeping the lease and `rungar serve` never ended after SIGTERM.
    engine = pair.engine("a")
    keeper = await keeper_for(engine, "host-a/1")
    answer = pair.github.renew_session
    loop = asyncio.get_running_loop()
    running: list[asyncio.Task[None]] = []

    async def renew_as_the_daemon_stops(scale_set: str) -> bool:
        # Two turns of the loop on: after the answer is handed over, before the keeper resumes.
        loop.call_soon(running[0].cancel)
        return await answer(scale_set)

    pair.github.renew_session = renew_as_the_daemon_stops  # type: ignore[method-assign]  # the stop lands mid-call
    running.append(asyncio.create_task(keeper.run()))
    # asyncio.wait, not a timeout around awaiting the task: that would cancel it a second time
    try:
        await asyncio.wait(running, timeout=WAIT)
        assert running[0].cancelled(), "the keeper ran on after the daemon's stop cancelled it"
    finally:
        running[0].cancel()


async def test_the_lead_scale_set_cannot_be_dropped_or_moved_while_the_daemon_runs(
    pair: Pair,
) -> None:
    engine = pair.engine("a")
    await keeper_for(engine, "host-a/1")
    control = Control.of(engine)
    moved = """\
providers: [{name: compute1, type: fake}]
scale_sets:
  - {name: other, max_runners: 2, providers: [compute1]}
  - {name: linux, max_runners: 10, providers: [compute1]}
"""
    answer = await control.apply(moved, "scale_sets.yaml", dry_run=False)
    assert not answer["applied"]
    assert any("linux is the lead" in p for p in answer["problems"]), answer["problems"]
    assert list(engine.sets) == ["linux"], "nothing of the refused configuration was applied"
    with pytest.raises(Busy, match="linux is the lead"):
        await control.remove_scale_set("linux")
