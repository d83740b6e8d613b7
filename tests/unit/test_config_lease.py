"""The lease's timing keys (docs/operating.md, "Running a standby"): defaults, and the refusal of a
lease that would run out between two renewals, named by file, line, column and key."""

from __future__ import annotations

import pytest

from rungar.config.loader import parse_scale_sets
from rungar.config.model import Timing
from rungar.errors import ConfigError

BASE = """\
providers:
  - name: compute1
    type: fake
scale_sets:
  - name: small
    max_runners: 2
    providers: [compute1]
timing:
"""


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_scale_sets(text, "s.yaml")
    return caught.value.problems


def test_the_lease_keys_default_to_the_documented_values() -> None:
    timing = parse_scale_sets(BASE + "  reconcile_interval: 30s\n", "s.yaml").timing
    assert (timing.lease_renew_interval, timing.lease_duration, timing.standby_retry) == (
        10.0,
        30.0,
        5.0,
    )
    assert Timing().lease_duration == 30.0


def test_a_renewal_interval_as_long_as_the_lease_is_refused_at_its_key() -> None:
    text = BASE + "  lease_duration: 20s\n  lease_renew_interval: 20s\n"
    assert problems(text) == [
        "s.yaml:10:3: timing.lease_renew_interval: lease_renew_interval (20s) must be shorter "
        "than lease_duration (20s): the lease would run out between renewals"
    ]


def test_a_lease_shorter_than_the_default_renewal_is_refused_at_its_own_key() -> None:
    found = problems(BASE + "  lease_duration: 5s\n")
    assert len(found) == 1 and found[0].startswith("s.yaml:9:3: timing.lease_duration: ")


def test_a_zero_standby_retry_is_refused() -> None:
    found = problems(BASE + "  standby_retry: 0s\n")
    assert len(found) == 1 and "timing.standby_retry" in found[0]
