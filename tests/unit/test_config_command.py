"""`rungar config` prints the effective configuration (defaults, anchors, runner layering,
shipped plugins, secrets redacted); `rungar config migrate` brings an older file to the current
format keeping its comments, mode and owner."""

from __future__ import annotations

import json
import stat
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from rungar.cli.main import main
from rungar.config.loader import parse_scale_sets

SCALE_SETS = """\
# our fleet
x-host: &host
  type: runnerd
  runner: { image: ghcr.io/actions/actions-runner:2.328.0, disk: 20GiB }
providers:
  - <<: *host
    name: compute1
    address: unix:///run/runnerd/provider.sock
    token_file: /etc/rungar/compute1.token
  - { name: gcp, type: gcp, project: acme, zones: [europe-west1-b], max_runners: 20 }
  - { name: hetzner, type: hetzner, command: [hz-plugin], api_token: hunter2 }
scale_sets:
  - name: small  # two CPUs
    max_runners: 4
    providers:
      - { name: compute1, runner: { vcpus: 2, memory: 4GiB } }
      - { name: gcp, runner: { machine_type: e2-standard-2 } }
      - hetzner
"""


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_effective_config_fills_defaults_layers_runners_and_names_the_shipped_plugin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "s.yaml").write_text(SCALE_SETS)
    code, out, _ = run(capsys, "config", str(tmp_path / "s.yaml"))
    assert code == 0
    shown = yaml.safe_load(out)
    assert shown["timing"]["reconcile_interval"] == "30s"
    assert shown["timing"]["hold"] == "1m"  # two reconcile intervals, resolved
    compute1, gcp, hetzner = shown["providers"]
    image = "ghcr.io/actions/actions-runner:2.328.0"
    assert compute1["runner"] == {"image": image, "disk": "20GiB"}
    assert compute1["token_file"] == "/etc/rungar/compute1.token"  # where a secret is: kept
    assert Path(gcp["command"][-1]).name in ("rungar-provider-gcp", "rungar_gcp.server")
    assert hetzner["api_token"] == "<redacted>"
    small = shown["scale_sets"][0]
    assert small["labels"] == ["small"] and small["placement"] == "spread"
    assert small["providers"][0]["runner"] == {
        "image": "ghcr.io/actions/actions-runner:2.328.0",
        "disk": "20GiB",
        "vcpus": 2,
        "memory": "4GiB",
    }
    assert "hunter2" not in out


def test_the_effective_config_is_itself_a_valid_equivalent_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "s.yaml").write_text(SCALE_SETS.replace("api_token: hunter2", "zone: fsn1"))
    _, out, _ = run(capsys, "config", str(tmp_path / "s.yaml"))
    original = parse_scale_sets(SCALE_SETS.replace("api_token: hunter2", "zone: fsn1"), "a")
    again = parse_scale_sets(out, "b")
    # labels are shown as GitHub gets them: the scale set's name when none are set
    assert again.scale_sets == tuple(replace(s, labels=(s.name,)) for s in original.scale_sets)
    assert again.timing == replace(original.timing, hold=original.timing.hold_duration)
    assert [p.runner for p in again.providers] == [p.runner for p in original.providers]


def test_json_carries_a_shape_version_seconds_and_the_redacted_settings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "s.yaml").write_text(SCALE_SETS)
    (tmp_path / "rungar.yaml").write_text(
        yaml.safe_dump(
            {
                "github": {"url": "https://github.com/acme", "token_path": "/etc/rungar/pat"},
                "scale_sets": str(tmp_path / "s.yaml"),
            }
        )
    )
    code, out, _ = run(capsys, "config", "-c", str(tmp_path / "rungar.yaml"), "--json")
    assert code == 0
    shown = json.loads(out)
    assert shown["version"] == 1
    assert shown["scale_sets"]["timing"]["reconcile_interval"] == 30.0
    assert shown["settings"]["github"]["token_path"] == "/etc/rungar/pat"
    assert shown["settings"]["socket"] == "/run/rungar/rungar.sock"


def test_numbers_are_never_redacted_socket_mode_is_octal_and_sentinels_show_what_is_in_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "s.yaml").write_text(
        SCALE_SETS.replace("max_runners: 4", "max_runners: 4\n    start_timeout: 7m")
    )
    (tmp_path / "rungar.yaml").write_text(
        "github: {url: 'https://github.com/acme', token_path: /etc/rungar/pat,"
        " timing: {admin_token_refresh_margin: 90}}\n"
        f"scale_sets: {tmp_path / 's.yaml'}\nsocket_mode: 0640\n"
    )
    code, out, _ = run(capsys, "config", "-c", str(tmp_path / "rungar.yaml"))
    assert code == 0
    assert "admin_token_refresh_margin: 90" in out
    assert "socket_mode: 0640\n" in out and "416" not in out
    assert "never_connected_grace: 0" not in out
    assert "#   small: never_connected_grace 7m, disconnected_grace 7m, stuck_after 7m" in out
    code, out, _ = run(capsys, "config", "-c", str(tmp_path / "rungar.yaml"), "--json")
    shown = json.loads(out)
    assert shown["settings"]["github"]["timing"]["admin_token_refresh_margin"] == 90
    assert shown["in_force"]["small"]["never_connected_grace"] == 420.0


def test_a_bad_file_is_refused_with_its_problems_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "s.yaml").write_text(SCALE_SETS.replace("max_runners: 4", "max_runners: -1"))
    code, _, err = run(capsys, "config", str(tmp_path / "s.yaml"))
    assert code == 2 and "scale_sets[0].max_runners" in err


OLD = """\
# our fleet: compute1 first
# (kept by migrate)

providers:
  - { name: p, type: fake }   # the test one
scale_sets:
  - { name: a, max_runners: 1, providers: [p] }
"""


def test_migrate_adds_the_version_below_the_opening_comments_and_keeps_every_other_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "s.yaml").write_text(OLD)
    code, out, err = run(capsys, "config", "migrate", str(tmp_path / "s.yaml"))
    assert code == 0
    assert out == OLD.replace("\nproviders:", "\nversion: 1\n\nproviders:")
    assert "to format 1" in err
    assert (tmp_path / "s.yaml").read_text() == OLD  # not written without --write


def test_migrate_write_rewrites_in_place_keeping_the_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(OLD)
    path.chmod(0o640)
    code, out, _ = run(capsys, "config", "migrate", "--write", str(path))
    assert code == 0 and "migrated from format 0 to 1" in out
    assert path.read_text().count("version: 1") == 1
    assert "# (kept by migrate)" in path.read_text()
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    code, out, _ = run(capsys, "config", "migrate", "-w", str(path))
    assert code == 0 and "nothing to change" in out


def test_migrate_refuses_a_newer_format_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("version: 2\n" + OLD)
    code, _, err = run(capsys, "config", "migrate", "--write", str(path))
    assert code == 2 and "formats up to 1" in err
    assert path.read_text() == "version: 2\n" + OLD
