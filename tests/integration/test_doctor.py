"""`rungar doctor` against the GitHub emulator and this host: one ok/warn/fail line per finding,
with what to do, and exit 1 when anything fails."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from email.utils import format_datetime
from pathlib import Path

import pytest
import yaml

from rungar.cli.main import main
from rungar.doctor.checks import FAIL, OK, WARN, disk_check, mode_check, skew_check
from rungar.testing.github_emulator import EmulatorOptions, GitHubEmulator


@pytest.fixture(scope="module")
def emulator() -> Iterator[GitHubEmulator]:
    em = GitHubEmulator(EmulatorOptions())
    em.start_in_thread()
    try:
        yield em
    finally:
        em.stop_thread()


def write_world(
    tmp_path: Path, url: str, *, token: str = "emulator-pat", token_mode: int = 0o600
) -> Path:
    (tmp_path / "token").write_text(token)
    (tmp_path / "token").chmod(token_mode)
    (tmp_path / "scale_sets.yaml").write_text(
        "providers:\n"
        "  - { name: local, type: fake }\n"
        f"  - {{ name: compute1, type: runnerd, address: 'unix://{tmp_path}/missing.sock' }}\n"
        "scale_sets: [{ name: s, max_runners: 1, providers: [local, compute1] }]\n"
    )
    (tmp_path / "state").mkdir(mode=0o700)
    settings = {
        "github": {"url": url, "token_path": str(tmp_path / "token")},
        "scale_sets": str(tmp_path / "scale_sets.yaml"),
        "state_dir": str(tmp_path / "state"),
        "socket": str(tmp_path / "rungar.sock"),
    }
    (tmp_path / "rungar.yaml").write_text(yaml.safe_dump(settings))
    return tmp_path / "rungar.yaml"


def doctor(capsys: pytest.CaptureFixture[str], config: Path) -> tuple[int, list[dict[str, str]]]:
    code = main(["doctor", "-c", str(config), "--json", "--provider-timeout", "3"])
    shown = json.loads(capsys.readouterr().out)
    assert shown["version"] == 1 and shown["ok"] is (code == 0)
    return code, shown["checks"]


def found(checks: list[dict[str, str]], area: str) -> list[tuple[str, str]]:
    return [(c["level"], c["message"]) for c in checks if c["area"] == area]


def test_good_credentials_and_an_unreachable_host_give_ok_lines_and_one_fail(
    tmp_path: Path, emulator: GitHubEmulator, capsys: pytest.CaptureFixture[str]
) -> None:
    code, checks = doctor(capsys, write_world(tmp_path, emulator.org_url))
    assert code == 1
    github = found(checks, "github")
    assert github[0][0] == OK and "may list and manage the runners of organization" in github[0][1]
    assert found(checks, "clock")[0][0] == OK
    assert found(checks, "provider local") == [(OK, "the in-process test provider")]
    compute1 = [c for c in checks if c["area"] == "provider compute1"]
    assert [c["level"] for c in compute1] == [FAIL]
    assert "start runnerd" in compute1[0]["fix"]
    token = f"the GitHub token {tmp_path}/token is its owner's only (mode 0600)"
    assert found(checks, "secret") == [(OK, token)]
    assert found(checks, "socket")[0][0] == WARN  # no daemon running: no socket yet
    assert "emulator-pat" not in json.dumps(checks)


def test_a_refused_token_fails_and_says_to_renew_it(
    tmp_path: Path, emulator: GitHubEmulator, capsys: pytest.CaptureFixture[str]
) -> None:
    code, checks = doctor(capsys, write_world(tmp_path, emulator.org_url, token="wrong"))
    assert code == 1
    [(level, message)] = found(checks, "github")
    assert level == FAIL and "401" in message


def test_a_scope_the_token_may_not_manage_fails_naming_the_permission(
    tmp_path: Path, emulator: GitHubEmulator, capsys: pytest.CaptureFixture[str]
) -> None:
    other_org = emulator.org_url.rsplit("/", 1)[0] + "/someone-else"
    code, checks = doctor(capsys, write_world(tmp_path, other_org))
    github = [c for c in checks if c["area"] == "github"]
    assert code == 1 and github[0]["level"] == FAIL
    assert "may not manage the runners of organization someone-else" in github[0]["message"]
    assert "admin:org" in github[0]["fix"]


def test_a_world_readable_token_file_fails(
    tmp_path: Path, emulator: GitHubEmulator, capsys: pytest.CaptureFixture[str]
) -> None:
    _, checks = doctor(capsys, write_world(tmp_path, emulator.org_url, token_mode=0o644))
    [(level, message)] = found(checks, "secret")
    assert level == FAIL and "readable by anyone" in message


def test_the_text_form_prints_a_line_per_finding_and_a_fix_under_each_failure(
    tmp_path: Path, emulator: GitHubEmulator, capsys: pytest.CaptureFixture[str]
) -> None:
    os.environ["NO_COLOR"] = "1"
    try:
        code = main(["doctor", "-c", str(write_world(tmp_path, emulator.org_url))])
    finally:
        del os.environ["NO_COLOR"]
    out = capsys.readouterr().out
    assert code == 1
    assert any(line.startswith("fail  provider compute1") for line in out.splitlines())
    assert "→ start runnerd" in out
    assert "\033[" not in out


def at(seconds_after_epoch: float) -> str:
    return format_datetime(datetime.fromtimestamp(seconds_after_epoch, UTC), usegmt=True)


@pytest.mark.parametrize(
    ("skew", "level"), [(0, OK), (5, OK), (-30, WARN), (45, WARN), (90, FAIL), (-600, FAIL)]
)
def test_clock_skew_is_ok_within_10s_a_warning_within_a_minute_and_a_failure_beyond(
    skew: float, level: str
) -> None:
    assert skew_check(1_800_000_000 + skew, at(1_800_000_000)).level == level


@pytest.mark.parametrize(
    ("mode", "level"), [(0o600, OK), (0o400, OK), (0o640, WARN), (0o604, FAIL), (0o666, FAIL)]
)
def test_a_secret_file_is_ok_only_when_its_owners_alone(mode: int, level: str) -> None:
    assert mode_check("secret", "/etc/rungar/pat", mode, "the token").level == level


def test_free_disk_fails_under_a_gibibyte_and_warns_under_five_percent() -> None:
    gib = 1 << 30
    assert disk_check("/", gib // 2, 100 * gib).level == FAIL
    assert disk_check("/", 3 * gib, 100 * gib).level == WARN
    assert disk_check("/", 30 * gib, 100 * gib).level == OK
