"""A FULL refusal's expected room is untrusted: kept only when within bounds, over the wire and
in process (rungar.model.bounded.believed_room)."""

from __future__ import annotations

import math

import pytest

from rungar.model import bounded
from rungar.model.machine import Refusal, RefusalKind, RoomExpected
from rungar.rpc import convert
from rungar.rpc._gen.rungar.provider.v1 import provider_pb2 as pb


def over_the_wire(refusal: Refusal) -> Refusal:
    message = pb.CreateResponse.FromString(
        convert.create_response_to_pb(refusal).SerializeToString()
    )
    answer = convert.create_response_from_pb(message)
    assert isinstance(answer, Refusal)
    return answer


def test_an_expected_room_round_trips_and_its_absence_stays_unknown() -> None:
    told = Refusal(RefusalKind.FULL, "slots busy", "slots", RoomExpected(40.0, 0.75))
    assert over_the_wire(told) == told
    silent = Refusal(RefusalKind.FULL, "slots busy", "slots")
    assert over_the_wire(silent).room is None
    now = Refusal(RefusalKind.FULL, "slots busy", "slots", RoomExpected(0.0, 0.0))
    assert over_the_wire(now).room == RoomExpected(0.0, 0.0), "zero is sent, not unset"


@pytest.mark.parametrize(
    ("seconds", "confidence", "why"),
    [
        (-1.0, 0.5, "room expected in -1.0 s is not 0 to 86400 s: ignored"),
        (86400.5, 0.5, "room expected in 86400.5 s is not 0 to 86400 s: ignored"),
        (math.inf, 0.5, "room expected in inf s is not 0 to 86400 s: ignored"),
        (math.nan, 0.5, "room expected in nan s is not 0 to 86400 s: ignored"),
        (30.0, 1.5, "room expected with confidence 1.5, not 0 to 1: ignored"),
        (30.0, math.nan, "room expected with confidence nan, not 0 to 1: ignored"),
    ],
)
def test_an_expected_room_out_of_bounds_is_dropped_and_says_why(
    seconds: float, confidence: float, why: str
) -> None:
    sent = Refusal(RefusalKind.FULL, "slots busy", "slots", RoomExpected(seconds, confidence))
    received = over_the_wire(sent)
    assert (received.room, received.room_ignored) == (None, why)
    assert bounded.believed_room(sent) == received, "in process as over the wire"


def test_only_a_full_refusal_may_say_when_room_comes() -> None:
    sent = Refusal(RefusalKind.FAILED, "backend error", "", RoomExpected(30.0, 0.9))
    received = over_the_wire(sent)
    assert received.room is None
    assert received.room_ignored == ("room expected on a failed refusal, not a full one: ignored")
    edge = Refusal(RefusalKind.FULL, "quota", "quota", RoomExpected(86400.0, 1.0))
    assert bounded.believed_room(edge) is edge, "a day, and certain, are within bounds"
