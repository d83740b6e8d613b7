"""Active and standby end to end: two ``rungar serve`` processes of one installation (each with
its own state directory, as on two machines; the same configuration), the GitHub emulator, and
the same providers. The active daemon is killed with SIGKILL during a burst of jobs; the
standby must take over, adopt what the dead one left, and serve every job with no runner
created twice and none left behind. The take-over time (SIGKILL until the standby says it is
active) is printed; benchmarks/standby.py reports it for docs/benchmarks.md.

The emulator's clock runs 10× faster. GitHub frees a session it no longer sees polled after
about a minute; here the dead daemon's sessions end through the emulator's control API as soon
as it is killed, so the whole run takes seconds, and a live daemon that a busy machine holds up
between two polls keeps its session (a lifetime of under a second once let the standby take the
lead session from a daemon that was alive). benchmarks/standby.py keeps that short lifetime
instead, as its figure is the take-over it causes.
``make test-long`` runs a longer burst over two scale sets, and waits for the dead daemon's
unfinished registrations to be swept too.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from rungar.model.machine import Created, CreateRequest, Refusal
from rungar.model.sentences import LEAD_NOTE
from rungar.rpc.admin_client import AdminClient, DaemonUnreachable
from rungar.testing.fake_provider import GIB, FakeProvider
from rungar.testing.github_emulator import EmulatorOptions, GitHubEmulator
from rungar.testing.github_emulator.model import JobState
from tests.e2e.daemon_world import POLL_SECONDS, DaemonWorld
from tests.waiting import WAIT

CLOCK_FACTOR = 10
SESSION_TTL = 8.0  # emulated seconds: 0.8 s of real time (benchmarks/standby.py)
STALE_NEVER = 36_000.0  # emulated seconds: the tests end a dead daemon's sessions themselves


def fleet(scale_sets: list[str], max_runners: int) -> dict[str, Any]:
    return {
        "version": 1,
        "timing": {
            "reconcile_interval": "5s",
            "left_grace": "2s",
            # A runner adopted after its job ended (its registration gone) goes after this.
            "never_connected_grace": "5s",
            "session_retry_first": "0.5s",
            "session_retry_max": "1s",
            "lease_renew_interval": "0.5s",
            "lease_duration": "2s",
            "standby_retry": "0.5s",
        },
        "providers": [
            {"name": "host-1", "type": "runnerd", "runner": {"vcpus": 2, "memory": "1GiB"}},
            {"name": "host-2", "type": "runnerd", "runner": {"vcpus": 2, "memory": "1GiB"}},
        ],
        "scale_sets": [
            {
                "name": name,
                "labels": [name],
                "max_runners": max_runners,
                "start_timeout": "30s",
                "providers": ["host-1", "host-2"],
            }
            for name in scale_sets
        ],
    }


@dataclass
class Peer:
    """The second daemon: same configuration and providers, its own state and socket."""

    root: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def socket(self) -> str:
        return str(self.root / "b.sock")

    def start(self, world: DaemonWorld) -> None:
        settings = yaml.safe_load((world.root / "rungar.yaml").read_text())
        settings.update(state_dir=str(self.root / "state-b"), socket=self.socket)
        (self.root / "rungar-b.yaml").write_text(yaml.safe_dump(settings))
        log = (self.root / "daemon-b.log").open("ab")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rungar.cli.main",
                "serve",
                "-c",
                str(self.root / "rungar-b.yaml"),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    async def status(self) -> dict[str, Any] | None:
        try:
            async with AdminClient(self.socket) as client:
                return await client.status()
        except DaemonUnreachable:
            return None

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait()

    def terminate(self) -> None:
        """SIGTERM, not waiting for the daemon to finish stopping (stop() reaps it)."""
        assert self.process is not None
        self.process.terminate()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(30)


@dataclass
class Creates:
    """Every Create the providers were asked, by runner: (provider, request id) each."""

    asked: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    def count(self, world: DaemonWorld) -> None:
        for name, provider in world.providers.items():
            original = provider.create

            async def create(
                request: CreateRequest, original: Any = original, name: str = name
            ) -> Created | Refusal:
                self.asked.setdefault(request.runner_name, []).append((name, request.request_id))
                result: Created | Refusal = await original(request)
                return result

            provider.create = create  # type: ignore[method-assign]  # counting, in this test only


class PairWorld(DaemonWorld):
    """The first daemon's world; the second daemon starts with the first, not after it."""

    peer: Peer

    async def start_daemon(self) -> None:
        if self.peer.process is None:
            self.peer.start(self)
        await super().start_daemon()


async def role(status: dict[str, Any] | None) -> str:
    lease = (status or {}).get("daemon", {}).get("lease") or {}
    return str(lease.get("role", ""))


async def wait(check: Any, what: str, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if await check():
            return
        await asyncio.sleep(POLL_SECONDS)
    raise AssertionError(f"timed out waiting for {what}")


async def make_pair(
    scale_sets: list[str], max_runners: int, session_ttl: float = SESSION_TTL
) -> AsyncIterator[tuple[DaemonWorld, Peer]]:
    root = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))  # unix socket paths are short
    providers = {
        "host-1": FakeProvider("host-1", vcpus=64, memory_bytes=128 * GIB),
        "host-2": FakeProvider("host-2", vcpus=64, memory_bytes=128 * GIB),
    }
    peer = Peer(root)
    world = PairWorld(root, providers, clock_factor=CLOCK_FACTOR)
    world.peer = peer
    world.emulator = GitHubEmulator(
        EmulatorOptions(
            long_poll_seconds=0.3,
            session_idle_ttl=session_ttl,
            assignment_timeout=600.0,
            clock_factor=CLOCK_FACTOR,
        )
    )
    try:
        yield world, peer
    finally:
        peer.stop()
        await world.stop()
        if not os.environ.get("RUNGAR_KEEP"):
            shutil.rmtree(root, ignore_errors=True)
        else:
            print("kept", root)


@pytest.fixture
async def pair() -> AsyncIterator[tuple[DaemonWorld, Peer]]:
    async for p in make_pair(["linux"], max_runners=8, session_ttl=STALE_NEVER):
        yield p


@pytest.fixture
async def big_pair() -> AsyncIterator[tuple[DaemonWorld, Peer]]:
    async for p in make_pair(["linux", "arm"], max_runners=20, session_ttl=STALE_NEVER):
        yield p


def stop_cleanly(world: DaemonWorld) -> None:
    """SIGTERM, not waiting for the daemon to finish stopping (world.stop() reaps it)."""
    assert world.daemon is not None
    world.daemon.terminate()


async def kill_the_active_one_during_a_burst(
    world: DaemonWorld,
    peer: Peer,
    scale_sets: list[str],
    jobs: int,
    sweep: bool,
    *,
    clean: bool = False,
    text: bool = False,
) -> float:
    """Start both, find the active one, stop it during a burst (SIGKILL; SIGTERM when
    ``clean``), check the standby serves everything; the seconds the take-over took. With
    sessions that never go stale (the tests), a killed daemon's sessions end as soon as it is
    killed, as GitHub ends them after a while."""
    creates = Creates()
    creates.count(world)
    await world.start(fleet(scale_sets, max_runners=20 if len(scale_sets) > 1 else 8))
    # Both daemons started at once and raced for the lead scale set's session: either won.
    daemons = {
        "first": (world.status, partial(stop_cleanly, world) if clean else world.kill_daemon),
        "second": (peer.status, peer.terminate if clean else peer.kill),
    }

    async def roles() -> dict[str, str]:
        """Each daemon's role; a standby's only once it names the active daemon (GitHub's 409
        named the owner of the session holding the lead scale set)."""
        found = {}
        for name, (ask, _) in daemons.items():
            status = await ask()
            found[name] = await role(status)
            lease = (status or {}).get("daemon", {}).get("lease") or {}
            if found[name] == "standby" and not lease.get("holder"):
                found[name] = "standby naming nobody"
        return found

    async def one_of_each() -> bool:
        found = await roles()
        return sorted(found.values()) == ["active", "standby"]

    await wait(one_of_each, "one daemon active and the other standing by", 30)
    active = next(name for name, r in (await roles()).items() if r == "active")
    standby = next(name for name in daemons if name != active)
    ask_active, kill_active = daemons[active]
    ask_standby, _ = daemons[standby]
    waiting = await ask_standby()
    assert waiting is not None
    words = {s["name"]: (s["status"], s["note"]) for s in waiting["scale_sets"]}
    assert words[scale_sets[0]][0] == "WAITING", "the standby's lead scale set holds nothing"
    for other in scale_sets[1:]:  # the others wait for the lease, asking GitHub nothing
        assert words[other] == ("WAITING", LEAD_NOTE), words
    if text:  # what a user reads on each daemon
        sockets = {"first": world.socket, "second": peer.socket}
        active_role = await role_line(sockets[active])
        standby_role = await role_line(sockets[standby])
        assert active_role.startswith("active (lease held since "), active_role
        holder = waiting["daemon"]["lease"]["holder"]
        assert standby_role.startswith(f"standby; active is {holder}, seen holding"), standby_role

    # The burst: jobs of 1 s (real time), assigned while the first daemon acts.
    await asyncio.gather(
        *(
            world.queue_job(
                labels=[scale_sets[i % len(scale_sets)]],
                name=f"job-{i}",
                duration=10,
                memory_bytes=8 << 20,
            )
            for i in range(jobs)
        )
    )

    async def runners_up() -> bool:
        status = await ask_active()
        return status is not None and len(status["runners"]) >= 2

    await wait(runners_up, "runners up", 30)
    killed_at = time.monotonic()  # the signal is sent now (a clean stop then takes a moment)
    kill_active()
    if not clean and world.emulator.options.session_idle_ttl >= STALE_NEVER:
        await end_sessions(world)
    await wait(lambda: _is(ask_standby(), "active"), "the standby to take over", 60)
    took_over = time.monotonic() - killed_at
    print(f"\ntake-over after {'SIGTERM' if clean else 'SIGKILL'}: {took_over:.2f}s")

    def served() -> bool:
        return all(j.state is JobState.COMPLETED for j in world.emulator.state.jobs.values())

    async def settled() -> bool:
        status = await ask_standby()
        return status is not None and not status["runners"] and served() and not world.machines()

    await wait(settled, "every job served and every machine gone", 60)
    # A Create asked again for one runner is a retry only with the same provider and request.
    twice = {name: asked for name, asked in creates.asked.items() if len(set(asked)) > 1}
    assert not twice, f"runners created twice: {twice}"
    # One runner per job: had the new active daemon not adopted the dead one's runners first,
    # it would have made its own for the jobs they were serving.
    print(f"{len(creates.asked)} runners created for {jobs} jobs")
    assert len(creates.asked) <= jobs, f"{len(creates.asked)} runners for {jobs} jobs"
    assert world.machines() == [], "machines left behind"
    if sweep:
        # The dead daemon's registrations that never got a machine are swept after
        # start_timeout; nothing else is left registered.
        def registered() -> list[str]:
            return [r.name for r in world.emulator.state.runners.values()]

        await wait(lambda: _none(registered()), "leftover registrations swept", 90)
    busy = [r.name for r in world.emulator.state.runners.values() if r.busy]
    assert busy == []
    return took_over


async def end_sessions(world: DaemonWorld) -> None:
    """GitHub lets the sessions nobody polls any more go: every session, through the emulator's
    control API (the standby holds none: GitHub refused it the lead's, and it asks nothing of
    the others while it stands by)."""
    async with httpx.AsyncClient(timeout=WAIT) as client:
        for scale_set_id in list(world.emulator.state.scale_sets):
            url = f"{world.emulator.base_url}/_fake/scalesets/{scale_set_id}/evict"
            answer = await client.post(url)
            assert answer.status_code == 204, answer.text


async def role_line(socket: str) -> str:
    """The ``Role:`` line of ``rungar status`` asked of the daemon on ``socket``."""
    command = [sys.executable, "-m", "rungar.cli.main", "status", "--socket", socket]
    done = await asyncio.to_thread(
        subprocess.run, command, capture_output=True, text=True, timeout=60
    )
    lines = [line for line in done.stdout.splitlines() if line.strip().startswith("Role:")]
    assert len(lines) == 1, done.stdout + done.stderr
    return lines[0].split("Role:", 1)[1].strip()


async def _is(status: Any, wanted: str) -> bool:
    return await role(await status) == wanted


async def _none(items: list[str]) -> bool:
    return not items


async def test_the_standby_takes_over_a_killed_daemon_serving_every_job_once(
    pair: tuple[DaemonWorld, Peer],
) -> None:
    world, peer = pair
    await kill_the_active_one_during_a_burst(world, peer, ["linux"], jobs=6, sweep=False)


@pytest.mark.long
async def test_the_standby_takes_over_two_scale_sets_and_sweeps_what_the_dead_one_left(
    big_pair: tuple[DaemonWorld, Peer],
) -> None:
    world, peer = big_pair
    await kill_the_active_one_during_a_burst(
        world, peer, ["linux", "arm"], jobs=30, sweep=True, text=True
    )
