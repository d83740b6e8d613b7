"""``github.apps`` in rungar.yaml (docs/configuration.md): several GitHub Apps of one
organisation, each with its client id, installation and key; every problem named at its
file:line:col and key, all at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from rungar.daemon.daemon import Daemon
from rungar.daemon.settings import load_settings
from rungar.errors import ConfigError
from tests.github_app import app_keys


def settings(tmp_path: Path, github: str) -> Path:
    path = tmp_path / "rungar.yaml"
    path.write_text(
        "github:\n  url: https://github.com/octo-org\n" + github + "scale_sets: scale_sets.yaml\n"
    )
    return path


APPS = """\
  apps:
    - client_id: Iv1.first
      installation_id: 11
      private_key_path: first.pem
    - client_id: Iv1.second
      installation_id: 12
      private_key_path: keys/second.pem
"""


def test_apps_are_read_in_order_their_keys_next_to_rungar_yaml(tmp_path: Path) -> None:
    github = load_settings(str(settings(tmp_path, APPS))).github
    assert [(a.client_id, a.installation_id, a.private_key_path) for a in github.apps] == [
        ("Iv1.first", 11, str(tmp_path / "first.pem")),
        ("Iv1.second", 12, str(tmp_path / "keys/second.pem")),
    ]


def test_the_single_app_stays_valid_and_lists_no_apps(tmp_path: Path) -> None:
    single = "  app_client_id: Iv1.only\n  app_installation_id: 3\n  app_private_key_path: k.pem\n"
    github = load_settings(str(settings(tmp_path, single))).github
    assert github.apps == () and github.app_client_id == "Iv1.only"


def test_every_problem_of_apps_is_named_at_its_line_and_key(tmp_path: Path) -> None:
    path = settings(
        tmp_path,
        """\
  apps:
    - client_id: Iv1.first
      installation_id: 0
      private_key_path: first.pem
    - client_id: Iv1.second
      private_key_path: second.pem
""",
    )
    with pytest.raises(ConfigError) as failed:
        load_settings(str(path))
    assert failed.value.problems == [
        f"{path}:5:24: github.apps[0].installation_id: Input should be greater than or equal to 1",
        f"{path}:7:7: github.apps[1].installation_id: Field required",
    ]


def test_an_app_listed_twice_or_apps_with_the_single_app_or_a_token_is_refused(
    tmp_path: Path,
) -> None:
    path = settings(
        tmp_path,
        "  token_path: token\n  app_client_id: Iv1.old\n"
        + APPS.replace("installation_id: 12", "installation_id: 11"),
    )
    with pytest.raises(ConfigError) as failed:
        load_settings(str(path))
    assert failed.value.problems == [
        f"{path}:6:5: github.apps: the single App's app_client_id, app_installation_id and "
        "app_private_key_path go with it no more: list that App under apps",
        f"{path}:6:5: github.apps: GitHub Apps and a token together are refused",
        f"{path}:10:24: github.apps[1].installation_id: the same as "
        "github.apps[0].installation_id: each App is listed once",
    ]


def test_an_apps_key_that_cannot_be_read_or_used_is_named_at_its_line(tmp_path: Path) -> None:
    private, _ = app_keys()
    (tmp_path / "first.pem").write_text(private)
    (tmp_path / "first.pem").chmod(0o600)
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "second.pem").write_text("not a key")
    (tmp_path / "keys" / "second.pem").chmod(0o600)
    path = settings(tmp_path, APPS)
    daemon = Daemon(load_settings(str(path)), settings_path=str(path))
    with pytest.raises(ConfigError) as failed:
        daemon.app_auths()
    assert failed.value.problems == [
        f"{path}:9:25: github.apps[1].private_key_path: github app Iv1.second: private key "
        "is not a usable RSA PEM"
    ]
    (tmp_path / "first.pem").unlink()
    (tmp_path / "keys" / "second.pem").write_text(private)
    with pytest.raises(ConfigError) as failed:
        daemon.app_auths()
    assert failed.value.problems == [
        f"{path}:6:25: github.apps[0].private_key_path: cannot read {tmp_path}/first.pem: "
        "No such file or directory"
    ]
