"""A provider's ``overflow_after``: taken only by work that has waited that long elsewhere."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rungar.config.loader import parse_scale_sets
from rungar.config.model import Placement
from rungar.errors import ConfigError
from rungar.model.sentences import overflow_reason
from rungar.placement import Fleet
from rungar.placement.plan import NotPlaced, Placed
from tests.unit.placement_helpers import FULL, Script, fleet, provider, scale_set, try_place

T0 = 1_000_000.0
PATIENCE = 300.0  # TIMING: reconcile_interval 30, so a hold (and the wait) lasts 60 s unrenewed


def overflow_fleet(patience: float = PATIENCE) -> Fleet:
    cloud = replace(provider("cloud", price_per_hour=0.4), overflow_after=patience)
    return fleet(
        [provider("host", weight=2), cloud],
        [scale_set("s", ["host", "cloud"], placement=Placement.PACK)],
    )


async def ask(f: Fleet, script: Script, at: float) -> Placed | NotPlaced:
    return await try_place(f, "s", script, at)


async def test_work_meeting_a_full_host_waits_out_overflow_after_before_the_cloud() -> None:
    f = overflow_fleet()
    script = Script({"host": FULL})
    first = await ask(f, script, T0)
    assert isinstance(first, NotPlaced)
    assert script.created_on() == ["host"], "the cloud is not asked yet"
    assert f.skip_reason("s", "cloud", T0 + 30) == overflow_reason(PATIENCE)
    assert overflow_reason(PATIENCE) == "taken only after 5m waiting for room elsewhere"
    at = T0
    while at < T0 + PATIENCE - 30:  # asking every reconcile_interval renews the wait
        at += 30
        assert isinstance(await ask(f, script, at), NotPlaced)
    assert "cloud" not in script.created_on()
    placed = await ask(f, script, T0 + PATIENCE)
    assert isinstance(placed, Placed) and placed.provider == "cloud"
    again = await ask(f, script, T0 + PATIENCE)
    assert isinstance(again, Placed) and again.provider == "cloud", "overflowing goes on"


async def test_the_wait_starts_again_once_a_host_takes_a_runner() -> None:
    f = overflow_fleet()
    script = Script({"host": FULL})
    for at in range(0, int(PATIENCE) + 1, 30):
        await ask(f, script, T0 + at)
    assert f.asking_for("s", T0 + PATIENCE) == PATIENCE
    opened = f.open_room("host", T0 + PATIENCE + 1)  # lifts the FULL wait on the host
    assert opened.forgiven == ("s",)
    placed = await ask(f, Script(), T0 + PATIENCE + 1)
    assert isinstance(placed, Placed) and placed.provider == "host"
    assert f.asking_for("s", T0 + PATIENCE + 2) == 0.0
    assert f.skip_reason("s", "cloud", T0 + PATIENCE + 2) == overflow_reason(PATIENCE)


async def test_a_wait_no_longer_renewed_lapses_after_hold_duration() -> None:
    f = overflow_fleet()
    script = Script({"host": FULL})
    await ask(f, script, T0)
    assert f.asking_for("s", T0 + 60) == 60.0
    assert f.asking_for("s", T0 + 61) == 0.0, "it stopped asking: no wait to count"
    await ask(f, script, T0 + 200)
    assert f.asking_for("s", T0 + 230) == 30.0, "counted afresh"


async def test_a_reserve_refill_never_overflows_before_work_has_waited() -> None:
    f = overflow_fleet()
    f.add_runner("s", "host")
    script = Script({"host": FULL})
    refill = await try_place(f, "s", script, T0, reserve=True)
    assert isinstance(refill, NotPlaced) and script.created_on() == ["host"]
    await try_place(f, "s", script, T0 + 30, reserve=True)
    assert f.asking_for("s", T0 + 30) == 0.0, "a reserve refill starts no wait"


async def test_a_scale_set_at_its_own_limit_starts_no_wait() -> None:
    f = fleet(
        [provider("host"), replace(provider("cloud"), overflow_after=PATIENCE)],
        [scale_set("s", ["host", "cloud"], max_runners=1)],
    )
    f.add_runner("s", "host")
    for at in (T0, T0 + 30):
        assert isinstance(await ask(f, Script(), at), NotPlaced)
    assert f.asking_for("s", T0 + 30) == 0.0


async def test_without_overflow_after_the_cloud_takes_the_runner_at_once() -> None:
    f = overflow_fleet(0.0)
    placed = await ask(f, Script({"host": FULL}), T0)
    assert isinstance(placed, Placed) and placed.provider == "cloud"


CONFIG = """\
providers:
  - {name: host, type: fake}
  - {name: cloud, type: fake, price_per_hour: 0.4, overflow_after: %s}
scale_sets:
  - {name: linux, max_runners: 2, providers: [host, cloud]}
"""


def test_overflow_after_is_read_as_a_duration_and_unset_means_at_once() -> None:
    config = parse_scale_sets(CONFIG % "5m", "/etc/rungar/s.yaml")
    assert [p.overflow_after for p in config.providers] == [0.0, 300.0]


def test_a_bad_overflow_after_names_its_file_line_and_key() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_scale_sets(CONFIG % "soon", "/etc/rungar/s.yaml")
    (problem,) = caught.value.problems
    assert problem.startswith("/etc/rungar/s.yaml:3:") and "overflow_after" in problem
