"""GitHub's side of the engine's hot paths: a reconcile pass asks GitHub for the runners once,
whatever the number of scale sets, and still sees each scale set's registrations as its own;
a create's intent names its registration before anything could need to remove it."""

from __future__ import annotations

from pathlib import Path

import pytest

from rungar.config.model import (
    ProviderConfig,
    ScaleSetConfig,
    ScaleSetProvider,
    ScaleSetsFile,
    Timing,
)
from rungar.engine.engine import Engine
from rungar.engine.report.events import EventLog
from rungar.model.runner import GitHubState, RunnerState
from rungar.store.sqlite import SqliteStore
from rungar.testing.clock import FakeClock
from rungar.testing.fake_github import FakeGitHub
from rungar.testing.fake_provider import GIB, FakeProvider

RUNNER = {"vcpus": 2, "memory": "4GiB"}
SETS = ("a", "b", "c")


def engine_for(tmp_path: Path, github: FakeGitHub, clock: FakeClock) -> Engine:
    provider = ProviderConfig("p", "fake", runner=RUNNER)
    sets = tuple(
        ScaleSetConfig(name, max_runners=5, providers=(ScaleSetProvider("p", RUNNER),))
        for name in SETS
    )
    return Engine(
        ScaleSetsFile((provider,), sets, Timing()),
        {"p": FakeProvider("p", vcpus=64, memory_bytes=128 * GIB, clock=clock)},
        github,
        clock=clock,
        store=SqliteStore(tmp_path / "state.db"),
        events=EventLog(clock),
        installation="gh-test",
    )


async def test_one_pass_lists_runners_once_and_syncs_each_scale_set_from_it(
    tmp_path: Path,
) -> None:
    clock, github = FakeClock(), FakeGitHub()
    engine = engine_for(tmp_path, github, clock)
    for state in engine.sets.values():
        state.id = await github.ensure_scale_set(state.config)
    for name in SETS:
        engine.on_demand(name, 1)
    await engine.drain_tasks()
    runner_of = {r.scale_set: r.name for r in engine.runners}
    github.start_runner(runner_of["a"], busy=True)
    github.start_runner(runner_of["b"], busy=False)
    github.calls.clear()

    clock.advance(1)
    await engine.reconcile()

    lists = [c for c in github.calls if c[0] == "list_runners"]
    # Checked against the former pass, one call per scale set: this line failed (3 calls).
    assert len(lists) == 1, github.calls
    states = {r.scale_set: (r.state, r.github) for r in engine.runners}
    assert states["a"] == (RunnerState.BUSY, GitHubState.BUSY)
    assert states["b"] == (RunnerState.IDLE, GitHubState.IDLE)
    assert states["c"] == (RunnerState.STARTING, GitHubState.OFFLINE)


async def test_a_pass_whose_list_of_runners_fails_changes_no_runner(tmp_path: Path) -> None:
    clock, github = FakeClock(), FakeGitHub()
    engine = engine_for(tmp_path, github, clock)
    for state in engine.sets.values():
        state.id = await github.ensure_scale_set(state.config)
    engine.on_demand("a", 1)
    await engine.drain_tasks()
    github.start_runner(next(r.name for r in engine.runners))
    github.fail_next("list_runners")

    clock.advance(1)
    await engine.reconcile()

    [record] = list(engine.runners)
    assert (record.state, record.github) == (RunnerState.STARTING, GitHubState.UNKNOWN)


class Killed(BaseException):
    """The process died here (kill -9): nothing after it runs."""


async def test_a_crash_while_a_registration_is_removed_unplaced_leaves_its_id_in_the_intent(
    tmp_path: Path,
) -> None:
    clock, github = FakeClock(), FakeGitHub()
    engine = engine_for(tmp_path, github, clock)
    state = engine.sets["a"]
    state.id = await github.ensure_scale_set(state.config)
    register = github.generate_jit_config

    async def register_then_lose_the_provider(
        scale_set_id: int, runner_name: str, app: int = 0
    ) -> tuple[int, str]:
        answer = await register(scale_set_id, runner_name, app)
        engine.fleet.set_disabled("p", True)  # no provider can be tried once registered
        return answer

    async def die(runner_id: int) -> None:
        raise Killed

    github.generate_jit_config = register_then_lose_the_provider  # type: ignore[method-assign]  # a fault on the fake
    github.remove_runner = die  # type: ignore[method-assign,assignment]  # never returns
    with pytest.raises(Killed):
        await engine.create_runner(state)

    # Checked without the write before the removal: this test failed (runner_id 0).
    [intent] = engine.store.intents()
    assert intent.runner_id == next(iter(github.runners)), "the registration can be removed"
