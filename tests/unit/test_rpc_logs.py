"""The production log pipeline's fast paths keep their promises: redaction, stamps, JSON."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator

import pytest
import structlog

from rungar import logs
from rungar.model.runner_block import RunnerBlock
from rungar.rpc import convert
from rungar.rpc._gen.rungar.provider.v1 import provider_pb2 as pb


class FixedClock:
    def __init__(self, now: float) -> None:
        self.t = now

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:  # pragma: no cover - unused
        self.t += seconds


@pytest.fixture
def json_lines() -> Iterator[io.StringIO]:
    out = io.StringIO()
    logs.configure("info", "json", stream=out, quiet_grpc_core=False)  # the env stays as it is
    yield out
    structlog.reset_defaults()


def test_secret_keys_are_redacted_on_every_line_not_only_the_first(json_lines: io.StringIO) -> None:
    log = structlog.get_logger("t")
    for _ in range(3):
        log.info("x", jit_config="SECRET-JIT", Token="SECRET-T", runner="r1")
    lines = [json.loads(line) for line in json_lines.getvalue().splitlines()]
    assert len(lines) == 3
    assert all(line["jit_config"] == line["Token"] == logs.REDACTED for line in lines)
    assert all(line["runner"] == "r1" for line in lines)
    assert "SECRET" not in json_lines.getvalue()


def test_the_stamp_is_iso_utc_with_microseconds() -> None:
    stamp = logs.UtcTimestamp(FixedClock(1_700_000_000.25))
    assert stamp(None, "info", {})["timestamp"] == "2023-11-14T22:13:20.250000Z"


def test_the_stamp_follows_the_clock_across_seconds() -> None:
    clock = FixedClock(1_700_000_000.999999)
    stamp = logs.UtcTimestamp(clock)
    assert stamp(None, "info", {})["timestamp"].startswith("2023-11-14T22:13:20.99999")
    clock.t = 1_700_000_061.5
    assert stamp(None, "info", {})["timestamp"] == "2023-11-14T22:14:21.500000Z"


def test_lines_are_one_json_object_each(json_lines: io.StringIO) -> None:
    structlog.get_logger("t").info("provider.call", call="Create", duration=0.000123)
    (line,) = json_lines.getvalue().splitlines()
    event = json.loads(line)
    assert event["event"] == "provider.call" and event["level"] == "info"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", event["timestamp"])


def test_a_non_finite_number_in_a_runner_block_is_refused_not_passed_on() -> None:
    message = pb.RunnerSpec()
    message.extra.fields["x"].number_value = float("inf")
    with pytest.raises(ValueError, match="not finite"):
        convert.runner_from_pb(message)


def test_empty_mappings_and_lists_in_a_runner_block_survive_the_trip() -> None:
    block = RunnerBlock(extra={"m": {}, "l": [], "t": (1, "a"), "n": None})
    back = convert.runner_from_pb(
        pb.RunnerSpec.FromString(convert.runner_to_pb(block).SerializeToString())
    )
    assert back.extra == {"m": {}, "l": [], "t": [1, "a"], "n": None}
