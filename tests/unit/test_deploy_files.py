"""The Containerfile and the sysusers.d/tmpfiles.d entries say what the README and the systemd
units say: a non-root daemon on a read-only root with its socket and state on volumes; the
users, groups and directories (with the units' modes) the units expect."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.unit.test_docs_readme import parsers, problem
from tests.unit.test_docs_systemd import read_unit, values

ROOT = Path(__file__).resolve().parents[2]
UNITS = ROOT / "config" / "systemd"


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Containerfile, continuation lines joined."""
    joined = path.read_text().replace("\\\n", " ")
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def final_stage(path: Path) -> list[tuple[str, str]]:
    found = instructions(path)
    last_from = max(i for i, (word, _) in enumerate(found) if word == "FROM")
    return found[last_from:]


def test_the_daemons_image_runs_as_a_non_root_user_with_socket_and_state_on_volumes() -> None:
    stage = dict(final_stage(ROOT / "Containerfile"))
    assert stage["USER"] == "10001:10001"
    assert set(json.loads(stage["VOLUME"])) == {"/var/lib/rungar", "/run/rungar"}
    assert "PYTHONDONTWRITEBYTECODE=1" in stage["ENV"]  # nothing written beside the code
    assert stage["STOPSIGNAL"] == "SIGTERM"


def test_the_images_commands_exist() -> None:
    stage = dict(final_stage(ROOT / "Containerfile"))
    entry = json.loads(stage["ENTRYPOINT"])
    cmd = json.loads(stage["CMD"])
    health = json.loads(stage["HEALTHCHECK"].split("CMD", 1)[1])
    cli = parsers()
    for argv in (entry + cmd, health):
        assert problem(argv, cli, set()) == "", argv
    assert entry + cmd == ["rungar", "serve", "-c", "/etc/rungar/rungar.yaml"]


def sysusers(name: str) -> dict[str, list[str]]:
    entries: dict[str, list[str]] = {"u": [], "g": []}
    for line in (UNITS / name).read_text().splitlines():
        if line and not line.startswith("#"):
            kind, who, *_ = line.split()
            entries[kind].append(who)
    return entries


def tmpfiles(name: str) -> dict[str, tuple[str, str, str]]:
    out = {}
    for line in (UNITS / name).read_text().splitlines():
        if line and not line.startswith("#"):
            kind, path, mode, user, group, _ = line.split()
            assert kind == "d"
            out[path] = (mode, user, group)
    return out


def test_sysusers_make_the_user_and_groups_the_units_run_as() -> None:
    rungar = read_unit(UNITS / "rungar.service")
    runnerd = read_unit(UNITS / "runnerd.service")
    assert values(rungar, "Service", "User") == sysusers("rungar.sysusers.conf")["u"]
    assert values(runnerd, "Service", "Group") == sysusers("runnerd.sysusers.conf")["g"]


@pytest.mark.parametrize("name", ["rungar", "runnerd"])
def test_tmpfiles_make_the_units_directories_with_the_units_modes(name: str) -> None:
    unit = read_unit(UNITS / f"{name}.service")
    made = tmpfiles(f"{name}.tmpfiles.conf")
    for key, base in (
        ("StateDirectory", "/var/lib"),
        ("RuntimeDirectory", "/run"),
        ("ConfigurationDirectory", "/etc"),
    ):
        [folder] = values(unit, "Service", key)
        [mode] = values(unit, "Service", key + "Mode")
        assert made[f"{base}/{folder}"][0] == mode, key


@pytest.mark.skipif(
    shutil.which("systemd-sysusers") is None or shutil.which("systemd-tmpfiles") is None,
    reason="systemd's tools are not installed",
)
def test_systemd_applies_both_into_an_empty_root(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    confs = [str(UNITS / f"{n}.sysusers.conf") for n in ("rungar", "runnerd")]
    subprocess.run(["systemd-sysusers", f"--root={tmp_path}", *confs], check=True)
    passwd = (tmp_path / "etc" / "passwd").read_text()
    groups = (tmp_path / "etc" / "group").read_text()
    assert "\nrungar:" in "\n" + passwd and "\nrunnerd:" in "\n" + groups
    for name in ("rungar", "runnerd"):
        conf = str(UNITS / f"{name}.tmpfiles.conf")
        subprocess.run(
            ["systemd-tmpfiles", f"--root={tmp_path}", "--create", conf],
            check=True,
            capture_output=True,
        )
    assert oct((tmp_path / "var" / "lib" / "rungar").stat().st_mode & 0o777) == "0o750"
    assert oct((tmp_path / "var" / "lib" / "runnerd").stat().st_mode & 0o777) == "0o700"
