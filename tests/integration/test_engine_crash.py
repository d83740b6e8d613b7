"""A crash at any moment, then a restart: no duplicate machine, and after one reconcile pass
no leaked machine (issue 4, item 5).

The crash is a BaseException raised at a random call into the outside world (GitHub or a
provider), before or after that call took effect, so nothing in the engine can clean up after
it — the in-memory state is simply dropped, as by ``kill -9``. The outside world (the fake
GitHub, the providers, the SQLite file) survives, and a new engine starts from it. The
subprocess version, with a real ``kill -9`` of ``rungar serve``, is in tests/e2e.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pytest

import rungar.engine.reconcile as reconcile_module
from rungar.config.model import (
    Placement,
    ProviderConfig,
    ScaleSetConfig,
    ScaleSetProvider,
    ScaleSetsFile,
    Timing,
)
from rungar.engine.engine import Engine
from rungar.engine.events import EventLog
from rungar.engine.reconcile import reconcile
from rungar.model.machine import RefusalKind
from rungar.store.sqlite import SqliteStore
from rungar.testing.clock import FakeClock
from rungar.testing.fake_github import FakeGitHub
from rungar.testing.fake_provider import GIB, FakeProvider

TRIALS = int(os.environ.get("RUNGAR_CRASH_TRIALS", "150"))
RUNNER = {"vcpus": 2, "memory": "4GiB"}


class Crash(BaseException):
    """The process died here."""


class Chaos:
    """Counts calls into the outside world and crashes at the chosen one."""

    def __init__(self, crash_at: int, after: bool) -> None:
        self.calls = 0
        self.crash_at = crash_at
        self.after = after
        self.crashed = False

    async def around(self, call: Any, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        hit = self.calls == self.crash_at and not self.crashed
        if hit and not self.after:
            self.crashed = True
            raise Crash
        result = await call(*args, **kwargs)
        if hit:
            self.crashed = True
            raise Crash
        return result


class ChaosProxy:
    def __init__(self, target: Any, chaos: Chaos, methods: set[str]) -> None:
        self._target = target
        self._chaos = chaos
        self._methods = methods

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if name not in self._methods:
            return attr

        async def wrapped(*args: Any, **kwargs: Any) -> Any:
            return await self._chaos.around(attr, *args, **kwargs)

        return wrapped


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


def engine_for(tmp_path: Path, github: Any, providers: dict[str, Any], clock: FakeClock) -> Engine:
    return Engine(
        config(),
        providers,
        github,
        clock=clock,
        store=SqliteStore(tmp_path / "state.db"),
        events=EventLog(clock),
        installation="gh-test",
    )


async def one_trial(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    clock = FakeClock()
    github = FakeGitHub()
    real = {
        "a": FakeProvider("a", vcpus=4, memory_bytes=8 * GIB, clock=clock),
        "b": FakeProvider("b", vcpus=64, memory_bytes=128 * GIB, clock=clock),
    }
    if rng.random() < 0.3:
        real["a"].refuse(RefusalKind.FULL, count=rng.randint(1, 3), resource="memory")
    chaos = Chaos(crash_at=rng.randint(1, 25), after=rng.random() < 0.5)
    proxied_github = ChaosProxy(github, chaos, {"generate_jit_config", "remove_runner"})
    proxied = {n: ChaosProxy(p, chaos, {"create", "delete"}) for n, p in real.items()}
    first = engine_for(tmp_path, proxied_github, proxied, clock)
    first.sets["linux"].id = await github.ensure_scale_set(first.sets["linux"].config)
    try:
        first.on_demand("linux", rng.randint(1, 6))
        await first.drain_tasks()
        for _ in range(3):
            clock.advance(rng.choice([1, 20, 40]))
            await reconcile(first)
            first.on_demand("linux", rng.randint(0, 6))
            await first.drain_tasks()
    except Crash:
        pass
    # kill -9: the first engine is dropped as it is; the world and the store remain.
    second = engine_for(tmp_path, github, real, clock)
    second.sets["linux"].id = github.scale_sets["linux"]
    clock.advance(1)
    await reconcile(second)
    await second.drain_tasks()
    machines = [m.name for p in real.values() for m in p.machines]
    assert len(machines) == len(set(machines)), f"seed {seed}: a runner has two machines"
    tracked = {r.name for r in second.runners}
    leaked = set(machines) - tracked
    assert not leaked, f"seed {seed}: machines nobody tracks after one pass: {leaked}"
    assert second.fleet.provider_count("a") <= 3, f"seed {seed}: provider a over its limit"
    assert second.store.intents() == [], f"seed {seed}: intents left unsettled"


@pytest.mark.parametrize("seed", range(TRIALS))
async def test_a_crash_at_any_moment_leaves_no_duplicate_and_no_leak(
    tmp_path: Path, seed: int
) -> None:
    await one_trial(tmp_path, seed)


async def test_the_check_catches_a_daemon_that_does_not_adopt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reconcile_module, "_adopt", lambda *args, **kwargs: None)
    caught = 0
    for seed in range(30):
        trial = tmp_path / str(seed)
        trial.mkdir()
        try:
            await one_trial(trial, seed)
        except AssertionError:
            caught += 1
    assert caught > 0
