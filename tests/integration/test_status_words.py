"""Every STATUS word the two tables of docs/troubleshooting.md document is set by the code in the
situation the table describes: each is provoked here, and the tables are read from that file, so
a word added to it without a provocation here fails the first two tests.

The message-session words (LISTENING, WAITING, UNREACHABLE) run the daemon's real listener
against the GitHub emulator: WAITING is another session already owning the scale set, which the
emulator answers with a conflict on session create. (Before the listener reported its phase,
that daemon showed LISTENING: the WAITING case failed.)
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import yaml

from rungar.cli.scale_sets import leftovers
from rungar.config.model import (
    ProviderConfig,
    ScaleSetConfig,
    ScaleSetProvider,
    ScaleSetsFile,
    Timing,
)
from rungar.daemon.control import Control
from rungar.daemon.runloop import RunLoop
from rungar.daemon.status import snapshot
from rungar.engine.engine import Engine
from rungar.engine.report.events import EventLog
from rungar.github.interface import GitHub
from rungar.model.machine import MachineState, RefusalKind
from rungar.model.phase import Phase
from rungar.store.sqlite import SqliteStore
from rungar.testing.clock import FakeClock
from rungar.testing.fake_github import FakeGitHub
from rungar.testing.fake_provider import GIB, FakeProvider
from rungar.testing.github_emulator import Fault, GitHubEmulator
from rungar.testing.github_emulator.harness import emulator, eventually, github

TROUBLESHOOTING = Path(__file__).resolve().parents[2] / "docs" / "troubleshooting.md"
RUNNER = {"vcpus": 2, "memory": "4GiB"}
INSTALLATION = "gh-test"


def readme_table(heading: str) -> list[tuple[str, str]]:
    """(status word, note or meaning) for each row of the table under ``heading``."""
    lines = TROUBLESHOOTING.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    rows: list[list[str]] = []
    for line in lines[start + 1 :]:
        if rows and not line.startswith("|"):
            break
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
    words = []
    for cells in rows[2:]:  # past the header and its rule
        shown = re.search(r"`([^`]+)`", cells[0])
        assert shown is not None, cells
        word = re.match(r"[A-Z]{2,}(?: [A-Z]{2,})*", shown.group(1))
        assert word is not None, cells
        words.append((word.group(0), cells[1]))
    return words


SCALE_SET_TABLE = "**Scale set STATUS**"
PROVIDER_TABLE = "**Provider STATUS**"


# ------------------------------------------------------------------ worlds


def _provider_configs(*names: str) -> tuple[ProviderConfig, ...]:
    return tuple(ProviderConfig(n, "fake", runner=RUNNER) for n in names)


def _scale_set(name: str, *providers: str, priority: int = 0, **kw: object) -> ScaleSetConfig:
    return ScaleSetConfig(
        name,
        max_runners=4,
        providers=tuple(ScaleSetProvider(p, RUNNER) for p in providers),
        priority=priority,
        start_timeout=60,
        **kw,  # type: ignore[arg-type]
    )


def new_engine(
    tmp_path: Path,
    github: GitHub,
    scale_sets: tuple[ScaleSetConfig, ...],
    providers: dict[str, FakeProvider],
    clock: FakeClock,
) -> Engine:
    config = ScaleSetsFile(
        _provider_configs(*providers), scale_sets, Timing(reconcile_interval=30, left_grace=0)
    )
    return Engine(
        config,
        providers,
        github,
        clock=clock,
        store=SqliteStore(tmp_path / "state.db"),
        events=EventLog(clock, tmp_path / "events.jsonl"),
        installation=INSTALLATION,
    )


def fake_world(
    tmp_path: Path, *scale_sets: ScaleSetConfig, providers: tuple[str, ...] = ("compute1",)
) -> tuple[Engine, dict[str, FakeProvider]]:
    clock = FakeClock()
    fakes = {n: FakeProvider(n, vcpus=64, memory_bytes=128 * GIB, clock=clock) for n in providers}
    scale_sets = scale_sets or (_scale_set("linux", *providers),)
    return new_engine(tmp_path, FakeGitHub(), scale_sets, fakes, clock), fakes


async def started(engine: Engine) -> Engine:
    for state in engine.sets.values():
        state.id = await engine.github.ensure_scale_set(state.config)
        state.phase = Phase.LISTENING  # as the run loop sets it once the scale set is found
    return engine


def scale_set_word(engine: Engine, name: str = "linux") -> tuple[str, str]:
    row = next(s for s in snapshot(engine.ctx)["scale_sets"] if s["name"] == name)
    return row["status"], row["note"]


def provider_word(engine: Engine, name: str = "compute1") -> str:
    row = next(p for p in snapshot(engine.ctx)["providers"] if p["name"] == name)
    status: str = row["status"]
    return status


@contextlib.asynccontextmanager
async def listening_daemon(tmp_path: Path, emu: GitHubEmulator) -> AsyncIterator[Engine]:
    """The daemon's engine and run loop, its listener on the emulator over HTTP."""
    async with github(emu, session_retry_first=0.05, session_retry_max=0.2) as gh:
        clock = FakeClock()
        fakes = {"compute1": FakeProvider("compute1", clock=clock)}
        engine = new_engine(tmp_path, gh, (_scale_set("linux", "compute1"),), fakes, clock)
        loop = RunLoop.of(engine)
        for state in engine.sets.values():
            loop.start_scale_set(state.config.name)
        try:
            yield engine
        finally:
            await loop.stop()


async def until_word(engine: Engine, word: str) -> tuple[str, str]:
    await eventually(lambda: scale_set_word(engine)[0] == word, what=f"status {word}")
    return scale_set_word(engine)


# ------------------------------------------------------------------ scale set words


async def listening(tmp_path: Path) -> tuple[str, str]:
    async with emulator() as emu, listening_daemon(tmp_path, emu) as engine:
        await eventually(lambda: any(s.alive for s in emu.state.sessions.values()), what="session")
        return await until_word(engine, "LISTENING")


async def starting(tmp_path: Path) -> tuple[str, str]:
    engine, _ = fake_world(tmp_path)  # not yet looked up on GitHub
    return scale_set_word(engine)


async def waiting(tmp_path: Path) -> tuple[str, str]:
    async with emulator() as emu:
        scale_set_id = emu.state.create_scale_set("linux", 1, ["linux", "rungar"]).id
        other = emu.state.open_session(scale_set_id, "another-daemon")
        assert other is not None
        async with listening_daemon(tmp_path, emu) as engine:
            word = await until_word(engine, "WAITING")
            emu.state.evict_session(scale_set_id)  # the other session ends: ours opens
            await until_word(engine, "LISTENING")
            return word


async def unreachable(tmp_path: Path) -> tuple[str, str]:
    async with emulator() as emu:
        emu.state.faults.add(Fault("A2", status=403, count=1000, message="Resource not accessible"))
        async with listening_daemon(tmp_path, emu) as engine:
            return await until_word(engine, "UNREACHABLE")


async def paused(tmp_path: Path) -> tuple[str, str]:
    engine, _ = fake_world(tmp_path, _scale_set("linux", "compute1", paused=True))
    return scale_set_word(await started(engine))


async def holding_world(tmp_path: Path) -> Engine:
    """Scale set "big" (priority 10) is refused FULL on compute1, which "linux" also uses."""
    engine, fakes = fake_world(
        tmp_path,
        _scale_set("big", "compute1", priority=10),
        _scale_set("linux", "compute1"),
    )
    fakes["compute1"].refuse(RefusalKind.FULL, always=True, resource="memory")
    await started(engine)
    engine.on_demand("big", 1)
    await engine.drain_tasks()
    return engine


async def holding_back(tmp_path: Path) -> tuple[str, str]:
    return scale_set_word(await holding_world(tmp_path))


async def busy_runner(engine: Engine, scale_set: str) -> None:
    """One runner of ``scale_set``, which GitHub reports busy with a job."""
    engine.on_demand(scale_set, 1)
    await engine.drain_tasks()
    github = engine.github
    assert isinstance(github, FakeGitHub)
    github.start_runner(engine.runners.live(scale_set)[0].name, busy=True)
    await engine.reconcile()


async def leftover(tmp_path: Path) -> tuple[str, str]:
    engine, _ = fake_world(tmp_path, _scale_set("linux", "compute1"), _scale_set("old", "compute1"))
    await busy_runner(await started(engine), "old")
    kept = {
        "providers": [{"name": "compute1", "type": "fake", "runner": RUNNER}],
        "scale_sets": [{"name": "linux", "max_runners": 4, "providers": ["compute1"]}],
    }
    answer = await Control.of(engine).apply(yaml.safe_dump(kept), "scale_sets.yaml", dry_run=False)
    assert answer["applied"], answer
    [entry] = leftovers(snapshot(engine.ctx))  # "old" is gone from the file; its busy runner is not
    return entry["status"], entry["name"]


async def crash_loop(tmp_path: Path) -> tuple[str, str]:
    """Two runners in a row whose machines stop before they connect: the provider is backed
    off for the scale set, which shows its crash loop rather than a healthy LISTENING."""
    engine, fakes = fake_world(tmp_path)
    await started(engine)
    engine.on_demand("linux", 1)
    for _ in range(2):
        await engine.drain_tasks()
        (record,) = engine.runners.live("linux")
        fakes["compute1"].set_state(record.name, MachineState.STOPPED)
        await engine.reconcile()
    await engine.drain_tasks()
    return scale_set_word(engine)


SCALE_SET_WORDS: dict[str, Callable[[Path], Awaitable[tuple[str, str]]]] = {
    "LISTENING": listening,
    "STARTING": starting,
    "WAITING": waiting,
    "UNREACHABLE": unreachable,
    "PAUSED": paused,
    "HOLDING BACK": holding_back,
    "LEFTOVER": leftover,
    "CRASH LOOP": crash_loop,
}


# ------------------------------------------------------------------ provider words


async def provider_unreachable(tmp_path: Path) -> str:
    engine, fakes = fake_world(tmp_path)
    fakes["compute1"].fail_lists(always=True)
    await (await started(engine)).reconcile()
    return provider_word(engine)


async def provider_disabled(tmp_path: Path) -> str:
    engine, _ = fake_world(tmp_path)
    Control.of(engine).disable("compute1")
    return provider_word(engine)


async def provider_draining(tmp_path: Path) -> str:
    engine, _ = fake_world(tmp_path)
    await busy_runner(await started(engine), "linux")  # a busy runner keeps the drain waiting
    await Control.of(engine).drain("compute1", wait=False)
    return provider_word(engine)


async def provider_held(tmp_path: Path) -> str:
    return provider_word(await holding_world(tmp_path))


async def provider_ok(tmp_path: Path) -> str:
    engine, _ = fake_world(tmp_path)
    await (await started(engine)).reconcile()
    return provider_word(engine)


PROVIDER_WORDS: dict[str, Callable[[Path], Awaitable[str]]] = {
    "UNREACHABLE": provider_unreachable,
    "DISABLED": provider_disabled,
    "DRAINING": provider_draining,
    "HELD": provider_held,
    "OK": provider_ok,
}


# ------------------------------------------------------------------ the tests


def test_every_documented_scale_set_status_word_is_provoked_here() -> None:
    documented = [word for word, _ in readme_table(SCALE_SET_TABLE)]
    assert sorted(documented) == sorted(SCALE_SET_WORDS)


def test_every_documented_provider_status_word_is_provoked_here() -> None:
    documented = [word for word, _ in readme_table(PROVIDER_TABLE)]
    assert sorted(documented) == sorted(PROVIDER_WORDS)


@pytest.mark.parametrize("word", sorted(SCALE_SET_WORDS))
async def test_the_daemon_shows_each_documented_scale_set_status_in_its_situation(
    word: str, tmp_path: Path
) -> None:
    status, note = await SCALE_SET_WORDS[word](tmp_path)
    assert status == word
    documented = dict(readme_table(SCALE_SET_TABLE))[word]
    if "*" not in documented and " N " not in documented and word != "LEFTOVER":
        assert note == ("" if documented == "—" else documented)  # the document's very words


@pytest.mark.parametrize("word", sorted(PROVIDER_WORDS))
async def test_the_daemon_shows_each_documented_provider_status_in_its_situation(
    word: str, tmp_path: Path
) -> None:
    status = await PROVIDER_WORDS[word](tmp_path)
    assert status.split()[0] == word, status


async def test_a_scale_set_whose_github_stops_answering_mid_session_is_unreachable_until_it_does(
    tmp_path: Path,
) -> None:
    async with emulator() as emu, listening_daemon(tmp_path, emu) as engine:
        await until_word(engine, "LISTENING")
        emu.state.faults.add(Fault("MQ_GET", status=503, count=10_000, message="down"))
        _, note = await until_word(engine, "UNREACHABLE")
        assert note.startswith("GitHub does not answer; trying again for the message session: ")
        emu.state.faults.clear()
        await until_word(engine, "LISTENING")


async def test_status_tells_when_the_daemon_started_and_which_github_it_serves(
    tmp_path: Path,
) -> None:
    clock = FakeClock(start=1_800_000_123.0)
    config = ScaleSetsFile(_provider_configs("compute1"), (_scale_set("linux", "compute1"),))
    fakes = {"compute1": FakeProvider("compute1", vcpus=64, memory_bytes=128 * GIB, clock=clock)}
    engine = Engine(
        config,
        fakes,
        FakeGitHub(),
        clock=clock,
        store=SqliteStore(tmp_path / "state.db"),
        events=EventLog(clock, tmp_path / "events.jsonl"),
        installation=INSTALLATION,
        github_url="https://github.example/acme",
    )
    clock.advance(60)
    daemon = snapshot(engine.ctx)["daemon"]
    assert (daemon["started_at"], daemon["now"]) == (1_800_000_123.0, 1_800_000_183.0)
    assert daemon["github"] == "https://github.example/acme"
    assert daemon["lease"] is None and daemon["ready"] is False  # no scale set listens yet
