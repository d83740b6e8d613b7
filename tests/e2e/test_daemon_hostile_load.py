"""Each fault of the hostile provider kit beside a healthy provider, through the real daemon,
under a load of 34 jobs: every job completes, none of the healthy provider's runners is removed
by anything but its own work, nothing is left behind, and ``rungar status`` names the hostile
provider's fault in words.

The hostile provider is :mod:`rungar.testing.hostile_provider`: a scenario of
:class:`~rungar.testing.hostile_provider.HostileProvider` served over gRPC, a plugin the daemon
starts that exits in the middle of every Create, or a
:class:`~rungar.testing.hostile_provider.GarbageServer` over TLS on loopback TCP (which also
counts the connections the daemon makes to it: at most one a second). The set runs in
``make test-long``; the default run keeps two of the cases at a smaller load
(tests/e2e/test_daemon_hostile_provider.py).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import ssl
import sys
import tempfile
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trustme

from rungar.testing.fake_provider import GIB, FakeProvider
from rungar.testing.github_emulator.model import JobState
from rungar.testing.hostile_provider import GarbageServer, HostileProvider
from tests.e2e.daemon_world import DaemonWorld
from tests.waiting import until, until_awaited

LOAD = 34
# A second between connections, less 5 % for the two clocks that time it.
A_SECOND = 0.95

# A plugin serving the hostile kit's provider with the scenarios named on its command line.
PLUGIN = """
import asyncio, sys
from rungar.rpc.plugin import serve_plugin
from rungar.testing.hostile_provider import HostileProvider
asyncio.run(serve_plugin(HostileProvider("b", scenarios=sys.argv[1:])))
"""


@dataclass(frozen=True)
class Case:
    """How b misbehaves, and what ``rungar status`` must say about b."""

    scenarios: frozenset[str] = frozenset()
    words: tuple[str, ...] = ()
    # What ``rungar status --json`` holds once the words are to be shown (the CLI composes some
    # of them): the daemon is asked for it in-process, and the CLI is run only then.
    held: tuple[str, ...] = ()
    served: str = "grpc"  # grpc (the kit over gRPC) | plugin | garbage (TLS over TCP)
    timeout: str = ""  # b's own call deadline
    b_creates: bool = True  # b creates machines that run jobs


CASES: dict[str, Case] = {
    "lists_others": Case(
        frozenset({"lists_others"}),
        ("provider b listed machine linux-", "which provider a holds: ignored"),
    ),
    "lists_twice": Case(
        frozenset({"lists_twice"}),
        ("provider b listed machine linux-", "more than once, with different states: not acted on"),
    ),
    "misnames_creates": Case(
        frozenset({"misnames_creates"}),
        ("linux found b failing", "answered with machine linux-"),
        b_creates=False,
    ),
    "huge_texts": Case(frozenset({"huge_texts"}), ("linux found b full",), b_creates=False),
    "other_installation": Case(
        frozenset({"other_installation"}),
        ("provider b listed machine stranger-1, which carries another installation's labels",),
    ),
    "bad_names": Case(
        frozenset({"bad_names"}),
        ("provider b listed a machine named 'nnnn", "…(cut)', not a machine name: ignored"),
    ),
    "hangs_lists": Case(
        frozenset({"hangs_lists"}),
        ("b cannot be reached: List timed out after 2 s",),
        held=("List timed out after 2 s",),
        timeout="2s",
        b_creates=False,
    ),
    "exits_in_create": Case(
        frozenset({"exits_in_create"}),
        ("provider b did not answer",),
        served="plugin",
        b_creates=False,
    ),
    "garbage_after_preface": Case(
        words=("provider b did not answer List: its connection broke",),
        served="garbage",
        b_creates=False,
    ),
}
# No line of ``rungar status`` carries a provider's text whole: the longest a line may be.
LONGEST_LINE = 2048


def fleet(case: Case, b: dict[str, Any], max_runners: int = 12) -> dict[str, Any]:
    """Healthy ``a`` and hostile ``b`` (its entry extended by ``b``) behind one scale set."""
    return {
        "version": 1,
        "timing": {
            "reconcile_interval": "5s",
            "left_grace": "1s",
            "backoff_first": "1s",
            "backoff_max": "4s",
        },
        "providers": [
            {"name": "a", "type": "runnerd", "runner": {"vcpus": 1, "memory": "1GiB"}},
            {
                "name": "b",
                "type": "runnerd",
                "runner": {"vcpus": 1, "memory": "1GiB"},
                **({"timeout": case.timeout} if case.timeout else {}),
                **b,
            },
        ],
        "scale_sets": [
            {
                "name": "linux",
                "labels": ["linux"],
                "max_runners": max_runners,
                "placement": "spread",
                "start_timeout": "60s",
                "providers": ["a", "b"],
            },
        ],
    }


@dataclass
class HostileWorld:
    world: DaemonWorld
    case: Case
    garbage: GarbageServer | None = None


def server_tls(folder: Path) -> tuple[ssl.SSLContext, dict[str, str]]:
    """A server context offering h2, and b's ``tls`` keys trusting it."""
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("provider.test").configure_cert(context)
    context.set_alpn_protocols(["h2"])
    return context, {"ca_file": str(folder / "ca.pem"), "server_name": "provider.test"}


async def hostile_world(case: Case) -> AsyncIterator[HostileWorld]:
    root = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))
    healthy = FakeProvider("a", vcpus=64, memory_bytes=128 * GIB)
    providers: dict[str, FakeProvider] = {"a": healthy}
    b: dict[str, Any] = {}
    garbage = None
    if case.served == "grpc":
        hostile = HostileProvider("b", scenarios=case.scenarios, vcpus=64, memory_bytes=128 * GIB)
        hostile.others = lambda: healthy.machines
        providers["b"] = hostile
    elif case.served == "plugin":
        (root / "plugin.py").write_text(PLUGIN)
        b["command"] = [sys.executable, str(root / "plugin.py"), *sorted(case.scenarios)]
    else:
        context, tls = server_tls(root)
        garbage = GarbageServer("127.0.0.1:0", tls=context)
        await garbage.start()
        b.update(address=garbage.address, tls=tls)
    world = DaemonWorld(root, providers)
    try:
        await world.start(fleet(case, b))
        yield HostileWorld(world, case, garbage)
    finally:
        await world.stop()
        if garbage is not None:
            await garbage.stop()
        shutil.rmtree(root, ignore_errors=True)


def events(world: DaemonWorld) -> list[dict[str, Any]]:
    path = world.root / "state" / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


async def run_load(world: DaemonWorld, jobs: int) -> None:
    for i in range(jobs):
        await world.queue_job(labels=["linux"], name=f"job-{i}", duration=30.0)
    await world.wait_for(
        lambda _: all(j.state is JobState.COMPLETED for j in world.emulator.state.jobs.values()),
        f"every one of the {jobs} jobs to complete",
        300,
    )
    await world.wait_for(
        lambda s: s is not None and not s["runners"] and not world.machines(),
        "every machine to be deleted",
        120,
    )
    await world.wait_for(
        lambda _: not world.emulator.state.runners, "every registration to be removed", 120
    )


def healthy_runners_removed(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """a's runners ended by anything but their own work (their job done)."""
    return [
        e
        for e in found
        if e["provider"] == "a"
        and (
            e["action"] in ("machine_gone", "lost", "crash_loop", "adopted")
            or (e["action"] == "removed" and e["attributes"].get("reason") == "ended")
        )
    ]


async def status_saying(world: DaemonWorld, case: Case) -> str:
    """What ``rungar status`` prints the first time it says all of the case's words: the
    daemon's status is asked in-process until it holds them, then the real CLI (a fault can be
    over a pass later, so this runs beside the load)."""

    async def said() -> str:
        document = await world.status()
        if document is None:
            return ""
        held = json.dumps(document, ensure_ascii=False)
        if not all(w in held for w in case.held or case.words):
            return ""
        shown = (await world.rungar("status")).stdout
        return shown if all(w in shown for w in case.words) else ""

    return await until_awaited(said, f"rungar status to say {case.words}", 240, every=0.2)


async def check_case(hostile: HostileWorld, jobs: int) -> None:
    world, case = hostile.world, hostile.case
    saying = asyncio.ensure_future(status_saying(world, case))
    asking = asyncio.ensure_future(a_pass_while_both_hold_machines(hostile))
    try:
        await run_load(world, jobs)
        shown = await saying
    finally:
        saying.cancel()
        asking.cancel()
    assert len(world.emulator.state.jobs) == jobs
    found = events(world)
    created = Counter(e["name"] for e in found if e["action"] == "created")
    assert created and max(created.values()) == 1, "no runner created twice"
    assert healthy_runners_removed(found) == [], "none of a's runners ended by what b did"
    assert max(len(line) for line in shown.splitlines()) <= LONGEST_LINE
    if case.served == "plugin":
        exited = [e["message"] for e in found if e["action"] == "plugin_exited"]
        assert exited and exited[0] == "plugin b exited (code 1); restarting in 1 s", exited
    if hostile.garbage is not None:
        # Every connection the daemon made to b, over the whole load: one a second at most.
        assert hostile.garbage.connections >= 2
        assert hostile.garbage.shortest_gap() >= A_SECOND, hostile.garbage.accepted_at


async def a_pass_while_both_hold_machines(hostile: HostileWorld) -> None:
    """A listing fault of b shows only in a pass made while b holds machines (and a, for
    "lists_others"): beside the load, one is asked for then, rather than only hoping the
    interval falls there."""
    world = hostile.world
    if hostile.case.b_creates:
        await until(
            lambda: all(world.providers[p].fake.machines for p in ("a", "b")),
            "machines on a and on b",
        )
        await world.reconcile()


@pytest.fixture
async def hostile(request: pytest.FixtureRequest) -> AsyncIterator[HostileWorld]:
    async for made in hostile_world(CASES[request.param]):
        yield made


@pytest.mark.long
@pytest.mark.parametrize("hostile", sorted(CASES), indirect=True)
async def test_every_job_of_a_34_job_load_completes_beside_a_hostile_provider(
    hostile: HostileWorld,
) -> None:
    await check_case(hostile, LOAD)
