"""``overflow: when_host_is_later``: a runner waits for a host's expected room rather than go
to a priced provider, when the host expects room sooner than that provider's start plus margin."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rungar.config.loader import parse_scale_sets
from rungar.config.model import Overflow, Placement
from rungar.errors import ConfigError
from rungar.model.machine import Refusal, RefusalKind, RoomExpected
from rungar.model.sentences import waits_for_host_reason
from rungar.placement import Fleet
from rungar.placement.host_waits import (
    START_MINIMUM,
    ExpectedRoom,
    StartTimes,
    host_to_wait_for,
)
from rungar.placement.plan import NotPlaced, Placed
from tests.unit.placement_helpers import FULL, TIMING, Script, fleet, provider, scale_set, try_place

T0 = 1_000_000.0
START, MARGIN = 60.0, 30.0  # the cloud's typical_start and overflow_margin: patience 90 s


def full_in(seconds: float, confidence: float = 0.8) -> Refusal:
    return Refusal(RefusalKind.FULL, "all slots busy", "slots", RoomExpected(seconds, confidence))


def waiting_fleet(overflow: Overflow = Overflow.WHEN_HOST_IS_LATER) -> Fleet:
    cloud = replace(
        provider("cloud", price_per_hour=0.4),
        overflow=overflow,
        overflow_margin=MARGIN,
        typical_start=START,
    )
    return fleet(
        [provider("host1", weight=2), provider("host2", weight=2), cloud],
        [scale_set("s", ["host1", "host2", "cloud"], placement=Placement.PACK)],
    )


def room(provider: str, at: float, confidence: float = 0.8) -> ExpectedRoom:
    return ExpectedRoom(provider, at, confidence, told=T0, retry_at=at)


def test_the_decision_waits_for_the_soonest_room_within_patience_while_the_wait_is_young() -> None:
    rooms = [room("host1", T0 + 80), room("host2", T0 + 40)]
    assert host_to_wait_for(rooms, T0, 90.0, since=T0) == rooms[1]
    assert host_to_wait_for(rooms, T0, 30.0, since=T0) is None, "no room sooner than patience"
    assert host_to_wait_for(rooms, T0 + 90, 90.0, since=T0) is None, "waited as long as patience"
    unsure = [room("host1", T0 + 10, confidence=0.3)]
    assert host_to_wait_for(unsure, T0, 90.0, since=T0) is None, "too unsure to wait for"
    assert host_to_wait_for([room("host1", T0 - 5)], T0, 90.0, since=T0) is not None, "due now"


async def test_a_runner_waits_for_a_host_that_expects_room_sooner_than_the_cloud_starts() -> None:
    f = waiting_fleet()
    script = Script({"host1": full_in(40), "host2": full_in(300)})
    first = await try_place(f, "s", script, T0)
    assert isinstance(first, NotPlaced)
    assert script.created_on() == ["host1", "host2"], "the cloud is not asked"
    assert f.skip_reason("s", "cloud", T0 + 10) == waits_for_host_reason("host1", 30)
    assert waits_for_host_reason("host1", 30) == "waits for host1: room expected in 30s"
    # host1 is tried again at the expected time, not after its backoff (10 s here)
    assert f.backoff("s", "host1").until == T0 + 40  # type: ignore[union-attr]  # refused above
    assert f.wake_at("s", T0 + 1) == T0 + 40
    (wait,) = f.host_waits(T0 + 10)
    assert (wait.provider, wait.host.provider, wait.host.confidence) == ("cloud", "host1", 0.8)
    # room came: host1 takes the runner at the expected time
    placed = await try_place(f, "s", Script({"host2": full_in(300)}), T0 + 40)
    assert isinstance(placed, Placed) and placed.provider == "host1"
    assert f.host_waits(T0 + 40) == [], "placing ends the wait"


async def test_the_cloud_takes_the_runner_when_no_host_expects_room_in_time() -> None:
    f = waiting_fleet()
    script = Script({"host1": full_in(200), "host2": full_in(95)})
    placed = await try_place(f, "s", script, T0)
    assert isinstance(placed, Placed) and placed.provider == "cloud"
    silent = Script({"host1": FULL, "host2": FULL})  # no room expected: today's rule
    again = await try_place(f, "s", silent, T0 + 1)
    assert isinstance(again, Placed) and again.provider == "cloud"


async def test_a_wait_that_keeps_being_put_off_ends_at_the_clouds_start_plus_margin() -> None:
    f = waiting_fleet()
    at = T0
    while at < T0 + START + MARGIN:
        result = await try_place(f, "s", Script({"host1": full_in(30), "host2": FULL}), at)
        assert isinstance(result, NotPlaced), at
        at += 30  # tried at each expected time; each time room is put off by 30 s
    assert f.wake_at("s", T0 + 60) == T0 + START + MARGIN, "woken when the wait ends"
    placed = await try_place(f, "s", Script({"host1": full_in(30), "host2": FULL}), at)
    assert isinstance(placed, Placed) and placed.provider == "cloud"


async def test_by_default_the_cloud_takes_it_at_once_and_what_hosts_expect_is_kept() -> None:
    f = waiting_fleet(Overflow.AT_ONCE)
    script = Script({"host1": full_in(5), "host2": full_in(5)})
    placed = await try_place(f, "s", script, T0)
    assert isinstance(placed, Placed) and placed.provider == "cloud"
    assert f.backoff("s", "host1").until == T0 + TIMING.backoff_first  # type: ignore[union-attr]  # refused above
    assert f.wake_at("s", T0) is None
    # what the hosts said is kept all the same, for any rule to read
    rooms = {(r.provider, r.at, r.confidence) for r in f.host_rooms.expected("s")}
    assert rooms == set(), "placing the runner on the cloud ended the wait"
    await try_place(f, "s", Script({"host1": full_in(5), "host2": FULL, "cloud": FULL}), T0 + 60)
    rooms = {(r.provider, r.at, r.confidence) for r in f.host_rooms.expected("s")}
    assert rooms == {("host1", T0 + 65, 0.8)}, "host2 said nothing of when"


def test_the_typical_start_is_measured_once_enough_starts_are_known() -> None:
    f = waiting_fleet()
    assert f.patience("cloud") == START + MARGIN
    for seconds in (40.0, 50.0, 45.0, 44.0)[: START_MINIMUM - 1]:
        f.record_start("cloud", seconds)
    assert f.patience("cloud") == START + MARGIN, "too few starts yet"
    f.record_start("cloud", 46.0)
    assert f.patience("cloud") == 45.0 + MARGIN  # the median of 40, 44, 45, 46, 50
    starts = StartTimes()
    for _ in range(30):
        starts.record("c", 100.0)
    for _ in range(20):
        starts.record("c", 10.0)
    assert starts.typical("c", 60.0) == 10.0, "the last 20 count"


YAML = """
providers:
  - {name: host, type: fake}
  - name: cloud
    type: fake
    price_per_hour: 0.4
    overflow: %s
scale_sets:
  - {name: s, max_runners: 3, providers: [host, cloud]}
"""


def test_overflow_is_read_with_its_margin_and_start_and_defaults_to_at_once() -> None:
    config = parse_scale_sets(YAML % "when_host_is_later", "/etc/rungar/s.yaml")
    cloud = config.providers[1]
    assert (cloud.overflow, cloud.overflow_margin, cloud.typical_start) == (
        Overflow.WHEN_HOST_IS_LATER,
        180.0,
        60.0,
    )
    plain = parse_scale_sets(YAML.replace("    overflow: %s\n", ""), "/etc/rungar/s.yaml")
    assert plain.providers[1].overflow is Overflow.AT_ONCE


def test_a_bad_overflow_names_its_file_line_and_key() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_scale_sets(YAML % "sometimes", "/etc/rungar/s.yaml")
    (problem,) = caught.value.problems
    assert problem.startswith("/etc/rungar/s.yaml:7:") and "overflow" in problem, problem
    assert "at_once, when_host_is_later" in problem
