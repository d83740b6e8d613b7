"""A crash at any outside call, then a restart: no duplicate machine, and after one reconcile
pass no leaked machine, no registration without a machine and no unsettled create intent.

Each trial first runs its scenario once without a crash to learn the sequence of calls the
engine makes into the outside world (GitHub and the providers), then picks one of those calls
and runs the scenario again, crashing the engine there, before or after the call took effect.

The crash cannot be swallowed: at that moment the world dies for the engine. The call raises,
and so does every later call into GitHub, a provider or the state database, from any task,
whatever catches the first exception — exactly what ``kill -9`` leaves: effects up to the
crash point, nothing after it. The engine's remaining tasks are then cancelled and it is
dropped. At that moment the state database must hold an intent for every machine and every
registration its runner table does not, naming the machine's provider and the registration's
id (:func:`intent_problems`). The world (fake GitHub, providers, the SQLite file) survives and a
new engine starts from it. Each trial records whether it crashed at the call it chose; the test
fails unless at least 95 % did, and unless the trials together crashed before and after every
kind of outside call. The same check with a real ``kill -9`` of ``rungar serve`` is in
tests/e2e/test_daemon_kill.py.

Negative controls: the same trials with a create that writes no intent, a reconcile pass that
never settles crash-left intents, or one that never adopts untracked machines, must be caught;
a crash aimed past the scenario's last call is counted as missed.
"""

from __future__ import annotations

import contextlib
import os
import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import rungar.engine.reconcile.reconciler as reconcile_module
from rungar.config.model import (
    Placement,
    ProviderConfig,
    ScaleSetConfig,
    ScaleSetProvider,
    ScaleSetsFile,
    Timing,
)
from rungar.engine.engine import Engine
from rungar.engine.report.events import EventLog
from rungar.model.create_intent import CreateIntent
from rungar.model.machine import RefusalKind
from rungar.store.sqlite import SqliteStore
from rungar.testing.clock import FakeClock
from rungar.testing.fake_github import FakeGitHub
from rungar.testing.fake_provider import GIB, FakeProvider

TRIALS = int(os.environ.get("RUNGAR_CRASH_TRIALS", "24"))  # each point of the 12 twice
RUNNER = {"vcpus": 2, "memory": "4GiB"}
GITHUB_CALLS = ("generate_jit_config", "remove_runner", "list_all_runners")
PROVIDER_CALLS = ("create", "delete", "list")
OUTSIDE_CALLS = GITHUB_CALLS + PROVIDER_CALLS


class Crashed(BaseException):
    """The process is dead: raised by every call into the world from the crash on."""


class World:
    """Counts the engine's calls into the outside world and kills the engine at the chosen one."""

    def __init__(self, crash_at: int = 0, after: bool = False) -> None:
        self.calls: list[str] = []
        self.crash_at = crash_at  # 1-based index into ``calls``; 0: never
        self.after = after
        self.dead = False
        self.crashed_at: tuple[int, str, bool] | None = None
        self.unread: Any = None  # the answer of the call the engine died in, never read

    def check_alive(self) -> None:
        if self.dead:
            raise Crashed

    def die(self, index: int, name: str) -> None:
        self.dead = True
        self.crashed_at = (index, name, self.after)
        raise Crashed

    async def around(self, name: str, call: Any, *args: Any, **kwargs: Any) -> Any:
        self.check_alive()
        self.calls.append(name)
        index = len(self.calls)
        if index == self.crash_at and not self.after:
            self.die(index, name)
        result = await call(*args, **kwargs)
        self.check_alive()  # died while this call was in flight: its answer is never read
        if index == self.crash_at:
            self.unread = result
            self.die(index, name)
        return result


class OutsideProxy:
    """GitHub or a provider as the engine sees it: every outside call goes through the world."""

    def __init__(self, target: Any, world: World, methods: tuple[str, ...]) -> None:
        self._target = target
        self._world = world
        self._methods = methods

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if name not in self._methods:
            return attr

        async def wrapped(*args: Any, **kwargs: Any) -> Any:
            return await self._world.around(name, attr, *args, **kwargs)

        return wrapped


class DyingStore(SqliteStore):
    """The state database as a process sees it: unreachable once the process is dead."""

    def __init__(self, path: Path, world: World) -> None:
        self._world = world
        super().__init__(path)

    def __getattribute__(self, name: str) -> Any:
        if not name.startswith("_") and object.__getattribute__(self, "_world").dead:
            raise Crashed
        return super().__getattribute__(name)


class ForgetfulStore(DyingStore):
    """A broken create: its intents are never written."""

    def write_intent(self, intent: CreateIntent) -> None:
        return None


class BlindStore(SqliteStore):
    """A broken settle: the reconcile pass never sees the intents a crash left behind."""

    def intents(self) -> list[CreateIntent]:
        return []


def config() -> ScaleSetsFile:
    providers = (
        ProviderConfig("a", "fake", runner=RUNNER, max_runners=3),
        ProviderConfig("b", "fake", runner=RUNNER),
    )
    scale_set = ScaleSetConfig(
        "linux",
        max_runners=6,
        placement=Placement.PACK,
        providers=(ScaleSetProvider("a", RUNNER), ScaleSetProvider("b", RUNNER)),
        start_timeout=60,
    )
    return ScaleSetsFile(providers, (scale_set,), Timing(left_grace=0))


def engine_for(store: SqliteStore, github: Any, providers: dict[str, Any], clock: Any) -> Engine:
    return Engine(
        config(),
        providers,
        github,
        clock=clock,
        store=store,
        events=EventLog(clock),
        installation="gh-test",
    )


@dataclass
class Trial:
    seed: int
    planned: str  # "<call> before|after"
    crashed_at: tuple[int, str, bool] | None
    crash_at: int
    problems: list[str]

    @property
    def crashed_as_planned(self) -> bool:
        return self.crashed_at is not None and self.crashed_at[0] == self.crash_at


async def run_scenario(
    seed: int,
    root: Path,
    world: World,
    store_type: type[SqliteStore] = SqliteStore,
    dying_store: type[DyingStore] = DyingStore,
) -> list[str]:
    """One scenario with the given world; the problems found after a restart and one pass."""
    rng = random.Random(seed)
    clock = FakeClock()
    github = FakeGitHub()
    real = {
        "a": FakeProvider("a", vcpus=4, memory_bytes=8 * GIB, clock=clock),
        "b": FakeProvider("b", vcpus=64, memory_bytes=128 * GIB, clock=clock),
    }
    if rng.random() < 0.3:
        # as a cloud can, some refused creates leave their machine behind for the engine
        leave = rng.random() < 0.5
        real["a"].refuse(
            RefusalKind.FULL, count=rng.randint(1, 3), resource="memory", leave_machine=leave
        )
    root.mkdir(parents=True, exist_ok=True)
    db = root / "state.db"
    first_store = dying_store(db, world)
    first = engine_for(
        first_store,
        OutsideProxy(github, world, GITHUB_CALLS),
        {n: OutsideProxy(p, world, PROVIDER_CALLS) for n, p in real.items()},
        clock,
    )
    first.sets["linux"].id = await github.ensure_scale_set(first.sets["linux"].config)

    async def drive() -> None:
        first.on_demand("linux", rng.randint(1, 6))
        await first.drain_tasks()
        for _ in range(3):
            world.check_alive()
            clock.advance(rng.choice([1, 20, 40]))
            await first.reconcile()
            for runner in list(github.runners.values())[: rng.randint(0, 3)]:
                github.start_runner(runner.name, busy=rng.random() < 0.5)
            first.on_demand("linux", rng.randint(0, 6))
            await first.drain_tasks()

    with contextlib.suppress(Crashed):
        await drive()
    # kill -9: whatever the engine still had running dies with it; the world remains.
    await first.tasks.cancel()
    SqliteStore.close(first_store)
    problems = intent_problems(db, github, real, world)

    second_store = store_type(db)
    second = engine_for(second_store, github, real, clock)
    second.sets["linux"].id = github.scale_sets["linux"]
    clock.advance(1)
    await second.reconcile()
    await second.drain_tasks()

    machines = [m.name for p in real.values() for m in p.machines]
    if len(machines) != len(set(machines)):
        problems.append(f"a runner has two machines: {sorted(machines)}")
    leaked = set(machines) - {r.name for r in second.runners}
    if leaked:
        problems.append(f"machines nobody tracks after one pass: {sorted(leaked)}")
    if second.fleet.provider_count("a") > 3:
        problems.append("provider a over its limit")
    unsettled = SqliteStore(db).intents()
    if unsettled:
        problems.append(f"intents left unsettled: {[i.runner for i in unsettled]}")
    unbacked = {r.name for r in github.runners.values()} - set(machines)
    if unbacked:
        problems.append(f"registrations with no machine after one pass: {sorted(unbacked)}")
    second_store.close()
    return problems


def intent_problems(
    db: Path, github: FakeGitHub, providers: dict[str, FakeProvider], world: World
) -> list[str]:
    """What the state database must hold at the crash for a restart to settle everything: an
    intent for every machine and every registration not in its runner table, naming the
    machine's provider and the registration's id (unless the crash came while GitHub's answer
    with that id was in flight, so the process never knew it)."""
    store = SqliteStore(db)
    try:
        kept = {r.name: r.provider for r in store.kept_runners()}
        intents = {i.runner: i for i in store.intents()}
    finally:
        store.close()
    jit = world.crashed_at is not None and world.crashed_at[1] == "generate_jit_config"
    unread = world.unread[0] if jit and world.unread is not None else 0
    registered = {r.name: r.id for r in github.runners.values()}
    problems = []
    for each in intents.values():
        if each.scale_set != "linux" or not each.request_id:
            problems.append(f"intent {each.runner} is incomplete: {each}")
        if each.runner_id and registered.get(each.runner, each.runner_id) != each.runner_id:
            problems.append(f"intent {each.runner} names another registration: {each}")
    machines = {m.name: name for name, p in providers.items() for m in p.machines}
    for runner, provider in machines.items():
        intent = intents.get(runner)
        if kept.get(runner) == provider:
            continue
        if intent is None or intent.provider != provider:
            problems.append(f"crash: machine {runner} on {provider} has no intent naming it")
        elif registered.get(runner, intent.runner_id) not in (intent.runner_id, unread):
            problems.append(f"crash: intent {runner} lacks its registration's id: {intent}")
    for runner, runner_id in registered.items():
        if runner in kept or runner in machines:
            continue
        intent = intents.get(runner)
        if intent is None:
            problems.append(f"crash: registration {runner} has no machine and no intent")
        elif intent.runner_id != runner_id and runner_id != unread:
            problems.append(f"crash: intent {runner} lacks its registration's id: {intent}")
    return problems


def choose_crash(seed: int, calls: list[str]) -> tuple[int, bool, str]:
    """Trial ``seed`` aims at one kind of call (cycling through them, before then after), at a
    random occurrence of it; a random call when this scenario never makes that kind."""
    rng = random.Random(f"crash-{seed}")
    kind = OUTSIDE_CALLS[seed % len(OUTSIDE_CALLS)]
    after = (seed // len(OUTSIDE_CALLS)) % 2 == 1
    at = [i + 1 for i, name in enumerate(calls) if name == kind] or list(range(1, len(calls) + 1))
    crash_at = rng.choice(at)
    return crash_at, after, f"{calls[crash_at - 1]} {'after' if after else 'before'}"


async def plan_crash(tmp_path: Path, seed: int) -> tuple[int, bool, str]:
    """Where trial ``seed`` crashes: one of the calls its scenario makes without a crash."""
    dry = World()
    problems = await run_scenario(seed, tmp_path / f"{seed}-dry", dry)
    assert not problems, f"seed {seed}: without a crash: {problems}"
    return choose_crash(seed, dry.calls)


async def crash_trial(
    tmp_path: Path,
    seed: int,
    plan: tuple[int, bool, str],
    store_type: type[SqliteStore],
    dying_store: type[DyingStore] = DyingStore,
) -> Trial:
    crash_at, after, planned = plan
    world = World(crash_at, after)
    problems = await run_scenario(seed, tmp_path / str(seed), world, store_type, dying_store)
    return Trial(seed, planned, world.crashed_at, crash_at, problems)


async def run_trials(
    tmp_path: Path, trials: int, store_type: type[SqliteStore] = SqliteStore
) -> list[Trial]:
    plans = [await plan_crash(tmp_path, seed) for seed in range(trials)]
    return [await crash_trial(tmp_path, s, plans[s], store_type) for s in range(trials)]


@pytest.mark.timeout(max(300, 2 * TRIALS))  # make test-long runs 2,000 trials
async def test_a_crash_at_any_outside_call_leaves_no_duplicate_no_leak_and_no_intent(
    tmp_path: Path,
) -> None:
    results = await run_trials(tmp_path, TRIALS)

    crashed = [t for t in results if t.crashed_as_planned]
    assert len(crashed) >= 0.95 * len(results), (
        f"only {len(crashed)} of {len(results)} trials crashed at their chosen call; "
        f"missed: {[(t.seed, t.planned) for t in results if not t.crashed_as_planned][:10]}"
    )
    reached = Counter(t.planned for t in crashed)
    every_point = {f"{call} {when}" for call in OUTSIDE_CALLS for when in ("before", "after")}
    assert every_point <= set(reached), f"never crashed at: {sorted(every_point - set(reached))}"
    failures = [(t.seed, t.planned, t.problems) for t in results if t.problems]
    assert not failures, failures


async def test_the_trials_count_a_crash_that_did_not_happen_at_its_point(tmp_path: Path) -> None:
    """If the crash never happens where it was aimed (here: never at all), the count says so."""
    (trial,) = await run_trials(tmp_path, 1)
    assert trial.crashed_as_planned
    world = World(crash_at=10_000)
    await run_scenario(0, tmp_path / "never", world)
    missed = Trial(0, "never", world.crashed_at, 10_000, [])
    assert not missed.crashed_as_planned


async def test_the_check_catches_a_reconcile_pass_that_does_not_settle_intents(
    tmp_path: Path,
) -> None:
    results = await run_trials(tmp_path, 12, store_type=BlindStore)
    caught = [t for t in results if any("unsettled" in p for p in t.problems)]
    assert len(caught) >= 3, [(t.seed, t.planned) for t in results]


async def test_the_check_catches_a_reconcile_pass_that_does_not_adopt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plans = [await plan_crash(tmp_path, seed) for seed in range(12)]
    monkeypatch.setattr(reconcile_module, "_adopt", lambda *args, **kwargs: None)
    results = [await crash_trial(tmp_path, s, plans[s], SqliteStore) for s in range(12)]
    caught = [t for t in results if any("nobody tracks" in p for p in t.problems)]
    assert len(caught) >= 3, [(t.seed, t.planned) for t in results]


async def test_a_create_left_with_no_provider_to_try_keeps_its_registrations_id_until_removed(
    tmp_path: Path,
) -> None:
    """Both providers go unreachable while GitHub registers the runner, so no Create is asked
    and the registration is removed at once: a crash during that removal must leave an intent
    that names the registration, or the restart could not remove it by id."""
    clock = FakeClock()
    store = SqliteStore(tmp_path / "state.db")
    seen: list[tuple[int, list[CreateIntent]]] = []

    class GoneWhileRegistering(FakeGitHub):
        async def generate_jit_config(
            self, scale_set_id: int, runner_name: str, app: int = 0
        ) -> Any:
            answer = await super().generate_jit_config(scale_set_id, runner_name, app)
            for name in ("a", "b"):
                engine.fleet.set_reachable(name, False)
            return answer

        async def remove_runner(self, runner_id: int) -> Any:
            seen.append((runner_id, store.intents()))  # what a kill -9 now would leave
            return await super().remove_runner(runner_id)

    github = GoneWhileRegistering()
    providers = {
        "a": FakeProvider("a", vcpus=4, memory_bytes=8 * GIB, clock=clock),
        "b": FakeProvider("b", vcpus=64, memory_bytes=128 * GIB, clock=clock),
    }
    engine = engine_for(store, github, dict(providers), clock)
    engine.sets["linux"].id = await github.ensure_scale_set(engine.sets["linux"].config)
    engine.on_demand("linux", 1)
    await engine.drain_tasks()

    assert [p.calls["create"] for p in providers.values()] == [0, 0]
    ((runner_id, intents),) = seen
    assert [(i.runner_id, i.provider) for i in intents] == [(runner_id, "")]
    assert store.intents() == [] and github.runners == {}
    store.close()


async def test_the_check_catches_a_create_that_writes_no_intent(tmp_path: Path) -> None:
    """With every intent write gone, crashes after a registration or a Create leave what the
    restart cannot settle, and the trials say so (at the crash and after the pass)."""
    plans = [await plan_crash(tmp_path, seed) for seed in range(12)]
    results = [
        await crash_trial(tmp_path, s, plans[s], SqliteStore, ForgetfulStore) for s in range(12)
    ]
    at_crash = [t for t in results if any(p.startswith("crash: ") for p in t.problems)]
    after_pass = [t for t in results if any("after one pass" in p for p in t.problems)]
    assert len(at_crash) >= 3 and after_pass, [(t.seed, t.planned) for t in results]
