"""The warning that GitHub is about to stop queueing jobs to a provider's runner, through the
engine on an injected clock: it appears 7 days before GitHub's 30-day window closes and not a
second earlier, in ``rungar status``, ``rungar doctor``, an event told once per change and
``rungar_provider_runner_days_left``; it ends when the provider reports the latest runner."""

from __future__ import annotations

from pathlib import Path

from rungar.cli.status import render_status
from rungar.config.model import (
    Placement,
    ProviderConfig,
    ScaleSetConfig,
    ScaleSetProvider,
    ScaleSetsFile,
    Timing,
)
from rungar.daemon.status import snapshot
from rungar.doctor.checks import WARN, runner_deadline_checks
from rungar.engine.engine import Engine
from rungar.engine.reconcile.runner_versions import read_latest_release
from rungar.engine.report.events import EventLog
from rungar.model.runner_release import RunnerRelease, parse_date
from rungar.model.runner_version import RunnerVersion
from rungar.placement.version_window import DAY
from rungar.store.sqlite import SqliteStore
from rungar.testing.clock import FakeClock
from rungar.testing.fake_github import FakeGitHub
from rungar.testing.fake_provider import GIB, FakeProvider

RUNNER = {"vcpus": 1}
RELEASED = float(parse_date("2026-11-01T12:00:00Z") or 0)
LINE = (
    "old runs runner 2.329.0; the latest is 2.330.0 (released 2026-11-01): GitHub stops "
    "queueing jobs to it on 2026-12-01"
)


def engine_for(tmp_path: Path, clock: FakeClock, github: FakeGitHub, version: str) -> Engine:
    config = ScaleSetsFile(
        (ProviderConfig("old", "fake", runner=RUNNER),),
        (
            ScaleSetConfig(
                "linux",
                max_runners=2,
                placement=Placement.PACK,
                providers=(ScaleSetProvider("old", RUNNER),),
            ),
        ),
        Timing(reconcile_interval=30),
    )
    provider = FakeProvider("old", vcpus=8, memory_bytes=8 * GIB, clock=clock)
    provider.runner_version = version
    return Engine(
        config,
        {"old": provider},
        github,
        clock=clock,
        store=SqliteStore(tmp_path / "state.db", now=clock.now),
        events=EventLog(clock, tmp_path / "events.jsonl"),
        installation="gh-test",
    )


def warnings(engine: Engine) -> list[str]:
    return [e.message for e in engine.events.recent() if e.action == "runner_expiring"]


def days_left(engine: Engine) -> float | None:
    value = engine.metrics.registry.get_sample_value(
        "rungar_provider_runner_days_left", {"provider": "old"}
    )
    return None if value is None else float(value)


async def test_the_warning_appears_seven_days_ahead_once_and_ends_with_the_latest_runner(
    tmp_path: Path,
) -> None:
    clock = FakeClock(RELEASED + 23 * DAY - 60)  # a minute before the warning is due
    github = FakeGitHub()
    github.runner_release = RunnerRelease(RunnerVersion(2, 330, 0), RELEASED)
    engine = engine_for(tmp_path, clock, github, "2.329.0")
    assert await read_latest_release(engine.ctx) == github.runner_release
    await engine.reconcile()
    assert warnings(engine) == []
    assert days_left(engine) == round(7 + 60 / DAY, 3)
    document = snapshot(engine.ctx)
    (old,) = document["providers"]
    assert old["runner_deadline"]["warn"] is False
    assert LINE not in render_status(document)
    assert runner_deadline_checks(document) == []

    clock.advance(60)  # 23 days after the release: 7 days before GitHub's window closes
    await engine.reconcile()
    assert warnings(engine) == [LINE + " (in 7d)"]
    assert days_left(engine) == 7.0
    document = snapshot(engine.ctx)
    assert f"  {LINE} (in 7d)" in render_status(document).splitlines()
    (check,) = runner_deadline_checks(document)
    assert (check.area, check.level, check.message) == ("provider old", WARN, LINE + " (in 7d)")
    assert "install runner 2.330.0 on old's machines" in check.fix
    assert document["daemon"]["runner_release"] == {
        "latest": "2.330.0",
        "released_at": RELEASED,
        "source": "github",
        "window_days": 30.0,
        "warn_days": 7.0,
    }

    clock.advance(DAY)
    await engine.reconcile()
    assert len(warnings(engine)) == 1, "told once per change, not every pass"

    # The host installs the latest runner: its Info says so at the next ask.
    engine.providers["old"].runner_version = "2.330.0"  # type: ignore[attr-defined]  # fake's
    clock.advance(engine.ctx.fleet.versions.info_interval)
    await engine.reconcile()
    assert days_left(engine) is None, "a current runner has no deadline"
    assert snapshot(engine.ctx)["providers"][0]["runner_deadline"] is None
    assert len(warnings(engine)) == 1


async def test_a_runner_past_its_window_is_told_again_as_stopped(tmp_path: Path) -> None:
    clock = FakeClock(RELEASED + 29 * DAY)
    github = FakeGitHub()
    github.runner_release = RunnerRelease(RunnerVersion(2, 330, 0), RELEASED)
    engine = engine_for(tmp_path, clock, github, "2.329.0")
    await read_latest_release(engine.ctx)
    await engine.reconcile()
    clock.advance(DAY)
    await engine.reconcile()
    assert warnings(engine)[-1] == (
        "old runs runner 2.329.0; the latest is 2.330.0 (released 2026-11-01): GitHub stopped "
        "queueing jobs to it on 2026-12-01"
    )
    assert len(warnings(engine)) == 2
    assert days_left(engine) == 0.0
