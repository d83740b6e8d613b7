"""`rungar doctor` with several GitHub Apps (``github.apps``): each App's key file is checked,
and each App asks GitHub for the runner listing; a revoked one fails naming itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rungar.cli.main import main
from rungar.doctor.checks import FAIL, OK
from rungar.testing.github_emulator import EmulatorOptions, GitHubEmulator
from tests.github_app import app_keys


def test_each_app_is_asked_and_a_revoked_one_fails_naming_itself(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = {"Iv1.first": app_keys(), "Iv1.second": app_keys()}
    emulator = GitHubEmulator(
        EmulatorOptions(
            apps={app: public for app, (_, public) in keys.items()},
            installations={1: "octo-org", 2: "octo-org"},
        )
    )
    emulator.start_in_thread()
    try:
        emulator.state.tokens.revoked_apps.add("Iv1.second")
        apps = []
        for n, (app, (private, _)) in enumerate(keys.items(), start=1):
            (tmp_path / f"{n}.pem").write_text(private)
            (tmp_path / f"{n}.pem").chmod(0o600)
            apps.append({"client_id": app, "installation_id": n, "private_key_path": f"{n}.pem"})
        (tmp_path / "scale_sets.yaml").write_text(
            "providers: [{ name: local, type: fake }]\n"
            "scale_sets: [{ name: s, max_runners: 1, providers: [local] }]\n"
        )
        (tmp_path / "state").mkdir(mode=0o700)
        settings = {
            "github": {"url": emulator.org_url, "apps": apps},
            "scale_sets": "scale_sets.yaml",
            "state_dir": "state",
            "socket": "rungar.sock",
        }
        (tmp_path / "rungar.yaml").write_text(yaml.safe_dump(settings))
        code = main(["doctor", "-c", str(tmp_path / "rungar.yaml"), "--json"])
        checks = json.loads(capsys.readouterr().out)["checks"]
    finally:
        emulator.stop_thread()
    assert code == 1
    github = [(c["level"], c["message"]) for c in checks if c["area"] == "github"]
    assert github[0][0] == OK and "GitHub App Iv1.first, installation 1 may list" in github[0][1]
    assert github[1][0] == FAIL and "GitHub refused GitHub App Iv1.second" in github[1][1]
    secrets = [(c["level"], c["message"]) for c in checks if c["area"] == "secret"]
    assert [level for level, _ in secrets] == [OK, OK]
    assert "App Iv1.second's private key" in secrets[1][1]
