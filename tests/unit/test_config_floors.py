"""``rungar validate`` refuses floors that cannot fit under ``max_runners``: ``min_runners`` plus
the warm pool's ``max``, and every schedule window's ``min_runners`` plus it."""

from __future__ import annotations

from pathlib import Path

import pytest

from rungar.cli.main import main as rungar

HEAD = """\
providers:
  - name: compute1
    type: fake
scale_sets:
  - name: ci
    max_runners: 4
"""


def validate(tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str) -> tuple[int, str]:
    path = tmp_path / "s.yaml"
    path.write_text(HEAD + body)
    code = rungar(["validate", str(path)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_min_runners_and_the_warm_pool_above_max_runners_are_refused_at_the_warm_pools_max(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = validate(
        tmp_path, capsys, "    min_runners: 3\n    providers: [compute1]\n    warm_pool: {max: 4}\n"
    )
    assert code == 2, out
    assert (
        "s.yaml:9:17: scale_sets[0].warm_pool.max: is 4; min_runners (3) + warm_pool.max (4) "
        "= 7 is more than max_runners (4)"
    ) in out


def test_a_schedule_windows_floor_and_the_warm_pool_above_max_runners_are_refused_at_the_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = """\
    providers: [compute1]
    warm_pool: {max: 2}
    schedule:
      windows:
        - {days: mon-fri, from: "08:00", to: "18:00", min_runners: 2}
        - {days: sat, from: "08:00", to: "18:00", min_runners: 3}
"""
    code, out = validate(tmp_path, capsys, body)
    assert code == 2, out
    assert (
        "s.yaml:12:51: scale_sets[0].schedule.windows[1].min_runners: is 3; this window's "
        "min_runners (3) + warm_pool.max (2) = 5 is more than max_runners (4)"
    ) in out
    assert "windows[0]" not in out, "a floor that fits exactly is accepted"


def test_floors_that_fit_pass_validate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = validate(
        tmp_path, capsys, "    min_runners: 2\n    providers: [compute1]\n    warm_pool: {max: 2}\n"
    )
    assert code == 0, out
