"""The engine end to end in one process: fake GitHub, fake providers, a real SQLite store.

Driven step by step (demand, drain the creates, reconcile) so every assertion is exact.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import pytest

from rungar.config.model import (
    Placement,
    ProviderConfig,
    ScaleSetConfig,
    ScaleSetProvider,
    ScaleSetsFile,
    Timing,
)
from rungar.daemon.control import Control
from rungar.daemon.daemon import StoreCursors
from rungar.engine.engine import Engine
from rungar.engine.report.events import EventLog
from rungar.errors import ProviderUnavailable
from rungar.github.interface import JobTimes
from rungar.model.create_intent import CreateIntent
from rungar.model.machine import (
    QUEUE_HINTS,
    Conclusion,
    Created,
    CreateRequest,
    JobHint,
    Machine,
    MachineState,
    Refusal,
    RefusalKind,
)
from rungar.model.runner import RemovalReason, RunnerState
from rungar.rpc.client import GrpcProvider
from rungar.rpc.server import serve
from rungar.store.sqlite import SqliteStore
from rungar.testing.clock import FakeClock
from rungar.testing.fake_github import FakeGitHub
from rungar.testing.fake_provider import GIB, FakeProvider

RUNNER = {"vcpus": 2, "memory": "4GiB"}


def config(max_runners: int = 10, placement: Placement = Placement.PACK) -> ScaleSetsFile:
    providers = (
        ProviderConfig("compute1", "fake", runner=RUNNER),
        ProviderConfig("compute2", "fake", runner=RUNNER),
    )
    scale_set = ScaleSetConfig(
        "linux",
        max_runners=max_runners,
        placement=placement,
        providers=(ScaleSetProvider("compute1", RUNNER), ScaleSetProvider("compute2", RUNNER)),
        start_timeout=60,
    )
    return ScaleSetsFile(providers, (scale_set,), Timing(reconcile_interval=30, left_grace=0))


class World:
    def __init__(self, tmp_path: Path, cfg: ScaleSetsFile | None = None) -> None:
        self.tmp_path = tmp_path
        self.clock = FakeClock()
        self.github = FakeGitHub()
        self.providers = {
            "compute1": FakeProvider("compute1", vcpus=4, memory_bytes=8 * GIB, clock=self.clock),
            "compute2": FakeProvider("compute2", vcpus=8, memory_bytes=16 * GIB, clock=self.clock),
        }
        self.cfg = cfg or config()
        self.engine = self.new_engine()

    def new_engine(self) -> Engine:
        return Engine(
            self.cfg,
            self.providers,
            self.github,
            clock=self.clock,
            store=SqliteStore(self.tmp_path / "state.db"),
            events=EventLog(self.clock, self.tmp_path / "events.jsonl"),
            installation="gh-test",
        )

    async def start(self) -> None:
        for state in self.engine.sets.values():
            state.id = await self.github.ensure_scale_set(state.config)

    async def demand(self, assigned: int) -> None:
        self.engine.on_demand("linux", assigned)
        await self.engine.drain_tasks()

    def on(self, provider: str) -> list[str]:
        return sorted(m.name for m in self.providers[provider].machines)


@pytest.fixture
async def world(tmp_path: Path) -> World:
    w = World(tmp_path)
    await w.start()
    return w


async def test_assigned_jobs_become_runners_on_the_first_provider_with_room(world: World) -> None:
    await world.demand(3)
    assert len(world.on("compute1")) == 2, "pack fills compute1 first"
    assert len(world.on("compute2")) == 1, "the refused runner goes to compute2 at once"
    assert len(world.engine.runners) == 3
    registered = {r.name for r in world.github.runners.values()}
    assert registered == set(world.on("compute1") + world.on("compute2"))
    assert world.engine.store.intents() == [], "intents are cleared once settled"


async def test_nothing_is_registered_when_no_provider_can_be_tried(world: World) -> None:
    for provider in world.providers.values():
        provider.refuse(RefusalKind.FULL, always=True, resource="memory")
    await world.demand(1)
    registrations = [c for c in world.github.calls if c[0] == "generate_jit_config"]
    assert len(registrations) == 1, "registered once, refused by both"
    assert world.github.runners == {}, "a refused create's registration is removed"
    world.clock.advance(1)
    await world.demand(1)
    registrations = [c for c in world.github.calls if c[0] == "generate_jit_config"]
    assert len(registrations) == 1, "both providers are in backoff: nothing registered"


async def test_a_refused_create_leaves_no_machine_behind(world: World) -> None:
    # The provider leaves the refused create's machine behind, as a cloud can: it is deleted.
    compute1 = world.providers["compute1"]
    compute1.refuse(RefusalKind.FAILED, message="image pull failed", leave_machine=True)
    await world.demand(1)
    assert compute1.calls["delete"] == 1
    assert world.on("compute1") == []
    assert len(world.on("compute2")) == 1


async def test_desired_never_exceeds_the_scale_sets_max_runners(tmp_path: Path) -> None:
    w = World(tmp_path, config(max_runners=2))
    await w.start()
    await w.demand(5)
    assert len(w.engine.runners) == 2
    assert w.engine.sets["linux"].desired == 2


async def test_a_job_that_completes_has_its_machine_deleted(world: World) -> None:
    await world.demand(1)
    (name,) = world.on("compute1")
    world.github.start_runner(name)
    world.engine.on_job_started("linux", "j1", name, JobHint("octo/app", "ci.yml", "build"))
    record = world.engine.runners.get(name)
    assert record is not None and record.state is RunnerState.BUSY
    world.github.finish_runner(name)
    world.engine.on_job_completed("linux", "j1", name, Conclusion.SUCCEEDED)
    await world.engine.drain_tasks()
    assert world.on("compute1") == []
    assert name not in world.engine.runners


async def test_the_provider_is_told_the_completed_jobs_conclusion_and_which_job_it_was(
    world: World,
) -> None:
    await world.demand(1)
    (name,) = world.on("compute1")
    world.github.start_runner(name)
    hint = JobHint("octo/app", ".github/workflows/ci.yml", "build", branch="main", run_id="42")
    world.engine.on_job_started("linux", "j1", name, hint)
    world.github.finish_runner(name)
    world.engine.on_job_completed("linux", "j1", name, Conclusion.FAILED)
    await world.engine.drain_tasks()
    removal = world.providers["compute1"].removals[name]
    assert (removal.reason, removal.conclusion) == (RemovalReason.JOB_COMPLETED, Conclusion.FAILED)
    assert removal.job == replace(hint, job_id="j1")


async def test_an_idle_runner_removed_by_a_drain_tells_its_provider_it_ran_no_job(
    world: World,
) -> None:
    await world.demand(1)
    (name,) = world.on("compute1")
    world.github.start_runner(name, busy=False)
    await world.engine.reconcile()
    await Control.of(world.engine).drain("compute1", wait=False)
    removal = world.providers["compute1"].removals[name]
    assert (removal.reason, removal.conclusion, removal.job) == (RemovalReason.DRAINED, None, None)


async def test_idle_surplus_is_removed_and_busy_runners_are_spared(world: World) -> None:
    await world.demand(3)
    names = sorted(r.name for r in world.engine.runners)
    busy = names[0]
    world.github.start_runner(busy)
    for name in names[1:]:
        world.github.start_runner(name, busy=False)
    await world.engine.reconcile()
    await world.demand(0)
    assert [r.name for r in world.engine.runners] == [busy]


async def test_an_unregistered_runner_is_removed_by_reconciliation(world: World) -> None:
    await world.demand(1)
    (name,) = world.on("compute1")
    world.github.start_runner(name, busy=False)
    await world.engine.reconcile()
    world.github.finish_runner(name)
    world.engine.on_demand("linux", 0)
    await world.engine.drain_tasks()
    await world.engine.reconcile()
    assert world.on("compute1") == []


async def test_a_restart_adopts_every_runner_and_creates_no_duplicate(world: World) -> None:
    await world.demand(2)
    before = world.on("compute1") + world.on("compute2")
    world.engine = world.new_engine()  # a new daemon, same store and fleet
    await world.start()
    await world.engine.reconcile()
    assert sorted(r.name for r in world.engine.runners) == sorted(before)
    world.engine.on_demand("linux", 2)
    await world.engine.drain_tasks()
    assert world.on("compute1") + world.on("compute2") == before


async def test_the_state_database_keeps_each_runner_until_its_machine_is_deleted(
    world: World,
) -> None:
    await world.demand(2)
    store = world.engine.store
    names = sorted(world.on("compute1") + world.on("compute2"))
    assert {r.name: r.state for r in store.kept_runners()} == dict.fromkeys(names, "starting")
    done, _ = names
    record = world.engine.runners.get(done)
    assert record is not None
    world.providers[record.provider].fail_deletes(always=True)
    world.engine.on_job_completed("linux", "7", done, Conclusion.SUCCEEDED)
    await world.engine.drain_tasks()
    await world.engine.reconcile()
    kept = {r.name: (r.state, r.removal_reason) for r in store.kept_runners()}
    assert kept[done] == ("leaving", "job_completed"), "its machine still counts"
    world.providers[record.provider].heal()
    await world.engine.reconcile()
    assert sorted(r.name for r in store.kept_runners()) == sorted(
        r.name for r in world.engine.runners
    )
    assert done not in {r.name for r in store.kept_runners()}


async def test_an_intent_without_a_machine_has_its_registration_removed(world: World) -> None:
    runner_id, _ = await world.github.generate_jit_config(
        world.engine.sets["linux"].id, "linux-0a0b0c0d"
    )
    world.engine.store.write_intent(
        CreateIntent("linux-0a0b0c0d", "linux", "req-1", runner_id, "compute1", world.clock.now())
    )
    await world.engine.reconcile()
    assert runner_id not in world.github.runners
    assert world.engine.store.intents() == []


async def test_runners_of_an_unreachable_provider_are_kept_then_written_off(world: World) -> None:
    await world.demand(1)
    (name,) = world.on("compute1")
    world.providers["compute1"].fail_lists(always=True)
    await world.engine.reconcile()
    assert name in world.engine.runners
    assert world.engine.fleet.skip_reason("linux", "compute1", world.clock.now()) == "unreachable"
    world.clock.advance(301)
    await world.engine.reconcile()
    assert name not in world.engine.runners
    assert world.on("compute1") == [name], "its machine is left alone"


async def test_a_provider_unreachable_through_a_delete_says_why_in_status(world: World) -> None:
    # A Delete that got no answer makes the provider unreachable as a List's silence does;
    # status says what went unanswered, not a bare "cannot be reached".
    from rungar.cli.status import render_status
    from rungar.daemon.status import snapshot

    await world.demand(1)
    (name,) = world.on("compute1")
    world.providers["compute1"].fail_deletes(always=True, unanswered=True)
    world.engine.on_job_completed("linux", "7", name, Conclusion.SUCCEEDED)
    await world.engine.drain_tasks()
    document = snapshot(world.engine.ctx)
    (compute1,) = [p for p in document["providers"] if p["name"] == "compute1"]
    assert compute1["state"] == "unreachable"
    assert compute1["error"] == "compute1: no answer to delete (scripted)"
    assert "compute1 cannot be reached: compute1: no answer to delete (scripted)" in render_status(
        document
    )


async def test_a_stopped_machine_ends_its_runner(world: World) -> None:
    await world.demand(1)
    (name,) = world.on("compute1")
    world.providers["compute1"].set_state(name, MachineState.STOPPED)
    world.engine.on_demand("linux", 0)
    await world.engine.drain_tasks()
    await world.engine.reconcile()
    assert world.on("compute1") == []


async def test_a_machine_stopped_before_its_runner_took_a_job_has_its_registration_removed(
    world: World,
) -> None:
    await world.demand(1)
    (name,) = world.on("compute1")
    runner_id = world.engine.runners.get(name).runner_id  # type: ignore[union-attr]
    assert runner_id in world.github.runners
    world.providers["compute1"].set_state(name, MachineState.STOPPED)
    await world.engine.reconcile()
    assert runner_id not in world.github.runners
    assert name not in [r.name for r in world.engine.runners]


async def test_a_busy_runners_stopped_machine_waits_a_pass_for_its_jobs_conclusion(
    world: World,
) -> None:
    await world.demand(1)
    (name,) = world.on("compute1")
    world.github.start_runner(name)
    world.engine.on_job_started("linux", "j1", name, JobHint("octo/app", "ci.yml", "build"))
    world.providers["compute1"].set_state(name, MachineState.STOPPED)
    await world.engine.reconcile()
    assert world.on("compute1") == [name]  # its job's completion may be a moment behind
    world.engine.on_job_completed("linux", "j1", name, Conclusion.CANCELLED)
    await world.engine.drain_tasks()
    removal = world.providers["compute1"].removals[name]
    assert (removal.reason, removal.conclusion) == (
        RemovalReason.JOB_COMPLETED,
        Conclusion.CANCELLED,
    )


async def test_a_busy_runners_stopped_machine_ends_it_when_no_conclusion_comes(
    world: World,
) -> None:
    await world.demand(1)
    (name,) = world.on("compute1")
    world.github.start_runner(name)
    world.engine.on_job_started("linux", "j1", name, JobHint("octo/app", "ci.yml", "build"))
    world.providers["compute1"].set_state(name, MachineState.STOPPED)
    await world.engine.reconcile()
    world.clock.advance(world.cfg.timing.reconcile_interval)
    await world.engine.reconcile()
    assert world.on("compute1") == []
    assert world.providers["compute1"].removals[name].reason is RemovalReason.ENDED


async def test_backoffs_and_holds_survive_a_restart(tmp_path: Path) -> None:
    """A priority scale set finds its only provider full: the provider is backed off for it
    and held for it against the lower priority one. A new engine on the same store keeps both
    (checked to fail with the holds left out of ``SqliteStore.save_placement``)."""
    big = ScaleSetConfig(
        "big",
        max_runners=2,
        priority=10,
        providers=(ScaleSetProvider("compute1", RUNNER),),
        start_timeout=60,
    )
    cfg = config()
    world = World(tmp_path, ScaleSetsFile(cfg.providers, (*cfg.scale_sets, big), cfg.timing))
    await world.start()
    world.providers["compute1"].refuse(RefusalKind.FULL, resource="memory")
    for _ in range(2):  # refused, then nothing to try: the hold
        world.engine.on_demand("big", 1)
        await world.engine.drain_tasks()
    now = world.clock.now()
    hold = world.engine.fleet.hold_on("compute1", now)
    assert hold is not None and hold.holder == "big"
    world.engine.save_placement()

    world.engine = world.new_engine()
    fleet = world.engine.fleet
    assert fleet.skip_reason("big", "compute1", now) == "full"
    restored = fleet.hold_on("compute1", now)
    assert restored is not None and (restored.holder, restored.priority) == ("big", 10)
    assert restored.since == hold.since
    assert "big" in (fleet.skip_reason("linux", "compute1", now) or "")


async def test_a_machine_listed_by_two_providers_belongs_to_the_one_that_made_it(
    world: World,
) -> None:
    await world.demand(1)
    (name,) = world.on("compute1")
    machine = world.providers["compute1"].machines[0]
    assert machine.labels["rungar.sh/provider"] == "compute1"
    shared = world.providers["compute2"]
    original = shared.list

    async def sees_both(selector: Mapping[str, str]) -> list[Machine]:
        return [*await original(selector), machine]

    shared.list = sees_both  # type: ignore[method-assign]  # a backend shared with compute1
    world.engine = world.new_engine()
    await world.start()
    await world.engine.reconcile()
    record = world.engine.runners.get(name)
    assert record is not None and record.provider == "compute1"


async def test_the_job_wait_metric_uses_githubs_assign_and_start_times(world: World) -> None:
    # A job assigned before a restart and started after it waited by GitHub's clock, not since
    # this engine heard of it.
    await world.demand(1)
    (name,) = world.on("compute1")
    world.github.start_runner(name)
    times = JobTimes(queued=1000.0, assigned=1010.0, started=1052.5)
    world.engine.on_job_started("linux", "j1", name, JobHint("octo/app", "ci.yml", "b"), times)
    registry = world.engine.metrics.registry
    assert registry.get_sample_value(
        "rungar_job_runner_wait_seconds_sum", {"scale_set": "linux"}
    ) == pytest.approx(42.5)
    started = [e for e in world.engine.events.recent() if e.action == "job_started"]
    assert started[-1].attributes["waited_s"] == 42.5
    assert started[-1].attributes["queued_at"] == 1000.0


async def test_the_state_database_keeps_scale_set_and_session_ids_across_a_restart(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "state.db")
    await StoreCursors(store).set_scale_set_id("linux", 7)
    await StoreCursors(store).set_session_id(7, "6f1c-session")
    store.close()
    reopened = StoreCursors(SqliteStore(tmp_path / "state.db"))
    assert await reopened.get_scale_set_id("linux") == 7
    assert await reopened.get_session_id(7) == "6f1c-session"
    await reopened.set_session_id(7, "")  # closed cleanly: nothing to delete at the next start
    assert await reopened.get_session_id(7) == ""
    assert await reopened.get_scale_set_id("windows") == 0


async def test_a_provider_holding_a_waiting_runner_hears_each_job_queued_for_its_scale_set(
    world: World,
) -> None:
    heard: list[tuple[str, str, tuple[str, ...]]] = []

    async def queue_changed(name: str, queued: tuple[JobHint, ...]) -> None:
        heard.append(("compute1", name, tuple(h.job for h in queued)))

    # compute1 follows queues; compute2, like most providers, does not.
    world.providers["compute1"].queue_changed = queue_changed  # type: ignore[attr-defined]  # a provider that follows queues
    await world.demand(1)
    (waiting,) = world.on("compute1")
    world.engine.on_job_assigned("linux", "j1", JobHint("acme/api", "ci", "lint", "j1"))
    world.engine.on_job_assigned("linux", "j2", JobHint("acme/api", "ci", "e2e", "j2"))
    await world.engine.drain_tasks()
    assert heard and heard[0][:2] == ("compute1", waiting)
    assert heard[-1] == ("compute1", waiting, ("lint", "e2e"))  # the latest queue, coalesced
    # A runner that took its job is not waiting: nobody hears of the queue for it.
    world.engine.on_job_started("linux", "j1", waiting, JobHint("acme/api", "ci", "lint", "j1"))
    heard.clear()
    world.engine.on_job_assigned("linux", "j3", JobHint("acme/api", "ci", "e2e", "j3"))
    await world.engine.drain_tasks()
    assert heard == []


async def test_a_burst_tells_a_provider_the_queue_front_once_and_again_only_when_it_changes(
    world: World,
) -> None:
    heard: list[tuple[str, ...]] = []
    failing = [False]

    async def queue_changed(name: str, queued: tuple[JobHint, ...]) -> None:
        if failing[0]:
            raise ProviderUnavailable("compute1 did not answer")
        heard.append(tuple(h.job_id for h in queued))

    world.providers["compute1"].queue_changed = queue_changed  # type: ignore[attr-defined]  # a provider that follows queues
    await world.demand(1)

    def assign(first: int, last: int) -> None:
        for n in range(first, last + 1):
            job = f"j{n}"
            world.engine.on_job_assigned("linux", job, JobHint("acme/api", "ci", "build", job))

    # A burst queues far more jobs than a queue update carries, a few at a time.
    for first in range(1, 3 * QUEUE_HINTS, 5):
        assign(first, first + 4)
        await world.engine.drain_tasks()
    front = tuple(f"j{n}" for n in range(1, QUEUE_HINTS + 1))
    assert heard[-1] == front, "the provider learns the final front of the queue"
    assert heard.count(front) == 1, "and is not told that same front again"
    assert len(heard) <= QUEUE_HINTS // 5 + 1, "one call per change of the front at most"

    # A job of the front leaves the queue: the next job queued tells the new front.
    world.engine.on_job_completed("linux", "j1", "", None)
    heard.clear()
    assign(100, 100)
    await world.engine.drain_tasks()
    assert heard == [(*front[1:], f"j{QUEUE_HINTS + 1}")]

    # A call that fails is made again at the next job queued, though the front is the same.
    world.engine.on_job_completed("linux", "j2", "", None)
    failing[0] = True
    assign(101, 101)
    await world.engine.drain_tasks()
    failing[0] = False
    heard.clear()
    assign(102, 102)
    await world.engine.drain_tasks()
    assert heard == [(*front[2:], f"j{QUEUE_HINTS + 1}", f"j{QUEUE_HINTS + 2}")]


async def test_over_grpc_a_burst_tells_the_provider_the_final_front_in_a_few_calls(
    tmp_path: Path,
) -> None:
    class Following(FakeProvider):
        """Records each queue update as the server hands it over, and each Create's hints."""

        def __init__(self) -> None:
            super().__init__("compute1", vcpus=64, memory_bytes=128 * GIB)
            self.heard: list[tuple[str, ...]] = []
            self.create_hints: list[tuple[str, ...]] = []

        async def queue_changed(self, name: str, queued: tuple[JobHint, ...]) -> None:
            self.heard.append(tuple(h.job_id for h in queued))

        async def create(self, request: CreateRequest) -> Created | Refusal:
            self.create_hints.append(tuple(h.job_id for h in request.job_hints))
            return await super().create(request)

    following = Following()
    server = await serve(following, f"unix://{tmp_path}/compute1.sock")
    client = GrpcProvider("compute1", server.address)
    try:
        world = World(tmp_path)
        world.providers["compute1"] = client  # type: ignore[assignment]  # the provider over gRPC
        world.engine = world.new_engine()
        await world.start()
        await world.demand(1)
        for first in range(1, 3 * QUEUE_HINTS, 5):
            for n in range(first, first + 5):
                hint = JobHint("acme/api", "ci", "build", f"j{n}", queued_at=1_700_000_000.0 + n)
                world.engine.on_job_assigned("linux", f"j{n}", hint)
            await world.engine.drain_tasks()
        front = tuple(f"j{n}" for n in range(1, QUEUE_HINTS + 1))
        assert following.heard[-1] == front, "the provider learns the final front"
        assert len(following.heard) <= QUEUE_HINTS // 5, following.heard
        # The next creates carry the same front, decoded as sent.
        await world.demand(3)
        assert following.create_hints[-2:] == [front, front]
    finally:
        await client.close()
        await server.stop(0)


async def test_a_job_that_left_the_queue_and_queued_again_is_told_again(world: World) -> None:
    heard: list[tuple[str, ...]] = []

    async def queue_changed(name: str, queued: tuple[JobHint, ...]) -> None:
        heard.append(tuple(h.job_id for h in queued))

    world.providers["compute1"].queue_changed = queue_changed  # type: ignore[attr-defined]  # a provider that follows queues
    await world.demand(1)
    hints = {job: JobHint("acme/api", "ci", "build", job) for job in ("j1", "j2")}
    for job, hint in hints.items():
        world.engine.on_job_assigned("linux", job, hint)
    await world.engine.drain_tasks()
    assert heard == [("j1", "j2")]
    # j2 ran elsewhere and was withdrawn; GitHub assigns it again: the same front as told, but
    # runners created while j2 was gone were not created with it.
    world.engine.on_job_completed("linux", "j2", "", None)
    world.engine.on_job_assigned("linux", "j2", hints["j2"])
    await world.engine.drain_tasks()
    assert heard == [("j1", "j2"), ("j1", "j2")]


async def test_status_json_has_its_shape_version_stable_values_and_null_for_no_limit(
    world: World,
) -> None:
    from rungar.daemon.status import snapshot

    await world.demand(1)
    (name,) = world.on("compute1")
    world.engine.on_job_started("linux", "j1", name, JobHint("acme/api", "ci", "build", "j1"))
    # A reconcile pass whose runner listing does not name the new runner yet (a burst: the
    # listing is cached) leaves it busy, as GitHub's job message said, not "not registered".
    for runner_id, listed in list(world.github.runners.items()):
        if listed.name == name:
            del world.github.runners[runner_id]
    await world.engine.reconcile()
    document = snapshot(world.engine.ctx)
    assert document["version"] == 2
    (runner,) = document["runners"]
    assert (runner["state"], runner["github"]) == ("busy", "busy")
    assert runner["machine"] in ("starting", "running")
    assert {p["name"]: p["max_runners"] for p in document["providers"]} == {
        "compute1": None,
        "compute2": None,
    }


async def test_creates_in_flight_count_as_runners_and_as_starting_alike(world: World) -> None:
    from rungar.cli.status import render_status
    from rungar.daemon.status import snapshot

    await world.demand(1)
    (name,) = world.on("compute1")
    world.engine.on_job_started("linux", "j1", name, JobHint("acme/api", "ci", "build", "j1"))
    for _ in range(2):
        world.engine.runners.creating.ask("linux")  # two creates asked, not answered yet
    document = snapshot(world.engine.ctx)
    (linux,) = document["scale_sets"]
    assert (linux["runners"], linux["busy"], linux["starting"], linux["creating"]) == (3, 1, 2, 2)
    assert linux["runners"] == linux["busy"] + linux["idle"] + linux["starting"]
    text = render_status(document)
    assert "3 (1 busy, 2 starting)" in text
    assert "3 runners, 2 of them being created; the scale sets allow 10 between them." in text


async def test_a_started_job_reaches_its_provider_with_the_clock_offset_measured_as_it_queued(
    world: World,
) -> None:
    await world.demand(1)
    (name,) = world.on("compute1")
    # GitHub's clock runs fast: the offset measured at its start message is 170 s smaller.
    queued = JobHint("acme/api", "ci", "build", "j1", queued_at=9_000.0, clock_offset=-8_000.0)
    world.engine.on_job_assigned("linux", "j1", queued)
    started = replace(queued, started_at=9_180.0, clock_offset=-8_170.0)
    world.engine.on_job_started("linux", "j1", name, started)
    await world.engine.drain_tasks()
    told = world.providers["compute1"].jobs[name]
    assert (told.queued_at, told.started_at, told.clock_offset) == (9_000.0, 9_180.0, -8_000.0)


async def test_a_provider_that_refused_a_scale_set_hears_its_jobs_leave_the_queue(
    world: World,
) -> None:
    heard: list[tuple[str, tuple[str, ...]]] = []

    async def queue_changed(name: str, queued: tuple[JobHint, ...]) -> None:
        heard.append((name, tuple(h.job_id for h in queued)))

    world.providers["compute1"].queue_changed = queue_changed  # type: ignore[attr-defined]  # a provider that follows queues
    for job in ("j1", "j2", "j3"):
        world.engine.on_job_assigned("linux", job, JobHint("acme/api", "ci", "build", job))
    await world.demand(3)  # compute1 takes two and refuses the third, which compute2 takes
    (elsewhere,) = world.on("compute2")
    assert heard == [], "nothing is told before a job leaves"
    first, second = world.on("compute1")
    for job, runner in (("j1", first), ("j2", second), ("j3", elsewhere)):
        world.engine.on_job_started("linux", job, runner, JobHint("acme/api", "ci", "build", job))
        await world.engine.drain_tasks()
    # compute1 is told, naming the runner it refused, until nothing it was refused for waits.
    names = {name for name, _ in heard}
    assert len(names) == 1 and names.isdisjoint(world.on("compute1"))
    assert heard[-1][1] == ()
    assert world.engine.sets["linux"].refused_by == {}
