"""Floors that cannot fit the providers' ``max_runners`` are refused by ``rungar validate``
(and by ``apply`` and the daemon's load, which read the file the same way), at the floor's
FILE:LINE:COL and key path, every problem at once: per scale set, and across scale sets that
share limited providers."""

from __future__ import annotations

from pathlib import Path

import pytest

from rungar.cli.main import main as rungar
from rungar.config.floors import floor_problems
from rungar.config.loader import parse_scale_sets
from rungar.config.model import ProviderConfig, ScaleSetConfig, ScaleSetProvider
from rungar.errors import ConfigError

PROVIDERS = """\
providers:
  - {name: host1, type: fake, max_runners: 4}
  - {name: host2, type: fake, max_runners: 2}
  - {name: host3, type: fake, max_runners: 2}
  - {name: cloud, type: fake}
scale_sets:
"""


def validate(tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str) -> tuple[int, str]:
    path = tmp_path / "s.yaml"
    path.write_text(PROVIDERS + body)
    code = rungar(["validate", str(path)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_a_floor_above_its_only_providers_limit_is_refused_at_min_runners(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = "  - {name: demo-small, max_runners: 10, min_runners: 8, providers: [host1]}\n"
    code, out = validate(tmp_path, capsys, body)
    assert code == 2, out
    assert (
        "s.yaml:7:41: scale_sets[0].min_runners: is 8, more than its providers may hold: "
        "4 (host1 max_runners 4)"
    ) in out


def test_two_floors_sharing_one_provider_that_holds_fewer_are_both_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = """\
  - {name: a, max_runners: 5, min_runners: 2, providers: [host2]}
  - {name: b, max_runners: 5, min_runners: 1, providers: [host2]}
  - {name: c, max_runners: 10, min_runners: 8, providers: [host1]}
"""
    code, out = validate(tmp_path, capsys, body)
    assert code == 2, out
    shared = (
        "the min_runners of the scale sets sharing its providers cannot all be kept: "
        "a 2 + b 1 = 3, more than those providers may hold: 2 (host2 max_runners 2)"
    )
    assert f"s.yaml:7:31: scale_sets[0].min_runners: is 2; {shared}" in out
    assert f"s.yaml:8:31: scale_sets[1].min_runners: is 1; {shared}" in out
    assert "s.yaml:9:32: scale_sets[2].min_runners: is 8, more than" in out, "all at once"


def test_the_issues_two_scale_sets_of_three_on_a_provider_of_two() -> None:
    text = PROVIDERS + (
        "  - {name: a, max_runners: 5, min_runners: 3, providers: [host2]}\n"
        "  - {name: b, max_runners: 5, min_runners: 3, providers: [host2]}\n"
    )
    with pytest.raises(ConfigError) as refused:
        parse_scale_sets(text, "s.yaml")  # what apply and the daemon's load read files with
    problems = refused.value.problems
    assert [p.split(": ")[0] for p in problems] == ["s.yaml:7:31", "s.yaml:8:31"]
    assert all("more than its providers may hold: 2 (host2 max_runners 2)" in p for p in problems)


def test_floors_that_only_fit_when_placed_across_shared_providers_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a must go on host2; b fits on host3 only if it leaves host2 to a: a placement exists.
    body = """\
  - {name: a, max_runners: 5, min_runners: 2, providers: [host2]}
  - {name: b, max_runners: 5, min_runners: 2, providers: [host2, host3]}
  - {name: c, max_runners: 9, min_runners: 9, providers: [host1, cloud]}
"""
    code, out = validate(tmp_path, capsys, body)
    assert code == 0, out


def test_a_schedule_windows_floor_above_its_providers_limits_is_refused_at_the_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = """\
  - name: e
    max_runners: 10
    providers: [host2, host3]
    schedule:
      windows:
        - {days: mon-fri, from: "08:00", to: "18:00", min_runners: 4}
        - {days: sat, from: "08:00", to: "18:00", min_runners: 5}
"""
    code, out = validate(tmp_path, capsys, body)
    assert code == 2, out
    assert (
        "s.yaml:13:51: scale_sets[0].schedule.windows[1].min_runners: is 5, more than its "
        "providers may hold: 4 (host2 max_runners 2, host3 max_runners 2)"
    ) in out
    assert "windows[0]" not in out, "a floor that fits exactly is accepted"


def test_a_provider_without_a_limit_holds_any_floor() -> None:
    providers = [ProviderConfig("host", "fake", max_runners=1), ProviderConfig("cloud", "fake")]
    scale_sets = [
        ScaleSetConfig(
            name,
            max_runners=50,
            min_runners=40,
            providers=(ScaleSetProvider("host"), ScaleSetProvider("cloud")),
        )
        for name in ("a", "b")
    ]
    assert floor_problems(providers, scale_sets) == []
