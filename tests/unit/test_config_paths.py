"""Every relative path in rungar.yaml, scale_sets.yaml and runnerd.toml resolves against the
folder of the file that names it, never the working directory; ``rungar validate --verbose`` and
``runnerd check-config --verbose`` print the paths as they will be opened.

Each test loads from another working directory (``monkeypatch.chdir``): with the paths resolved
against the working directory instead (as ``socket`` and ``token_path`` once were), they fail.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from runnerd.config import load_config

from rungar.cli.main import main as rungar
from rungar.config.loader import load_scale_sets
from rungar.daemon.settings import load_settings

SCALE_SETS = {
    "version": 1,
    "providers": [
        {"name": "local", "type": "runnerd", "address": "unix:run/runnerd.sock"},
        {"name": "absolute", "type": "runnerd", "address": "unix:/srv/runnerd.sock"},
        {
            "name": "remote",
            "type": "runnerd",
            "address": "compute2.example.internal:7443",
            "tls": {"ca_file": "tls/ca.pem", "cert_file": "tls/me.pem", "key_file": "tls/me.key"},
            "token_file": "secrets/runnerd-token",
        },
    ],
    "scale_sets": [{"name": "linux", "max_runners": 2, "providers": ["local"]}],
}

RUNGAR_YAML = {
    "github": {"url": "https://github.com/my-org", "token_path": "secrets/github-token"},
    "scale_sets": "scale_sets.yaml",
    "state_dir": "state",
    "socket": "run/rungar.sock",
    "webhook": {"secret_path": "secrets/webhook"},
    "events": {"file": "logs/events.jsonl"},
}

RUNNERD_TOML = """\
[host]
memory_max = "8G"
state_dir = "state"
socket = "run/provider.sock"
tls_cert = "tls/server.pem"
tls_key = "tls/server.key"
tls_ca = "tls/ca.pem"
token_file = "secrets/token"
cgroup_root = "cgroup"

[profiles.small]
cpus = 1
memory = "1G"
slots = 2
"""


@pytest.fixture
def config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "etc"
    folder.mkdir()
    (folder / "scale_sets.yaml").write_text(yaml.safe_dump(SCALE_SETS))
    (folder / "rungar.yaml").write_text(yaml.safe_dump(RUNGAR_YAML))
    (folder / "runnerd.toml").write_text(RUNNERD_TOML)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    return folder


def test_every_relative_path_in_rungar_yaml_resolves_against_its_folder(config_dir: Path) -> None:
    settings = load_settings(str(config_dir / "rungar.yaml"))
    assert settings.scale_sets == str(config_dir / "scale_sets.yaml")
    assert settings.state_dir == str(config_dir / "state")
    assert settings.socket == str(config_dir / "run" / "rungar.sock")
    assert settings.github.token_path == str(config_dir / "secrets" / "github-token")
    assert settings.webhook.secret_path == str(config_dir / "secrets" / "webhook")
    assert settings.events.file == str(config_dir / "logs" / "events.jsonl")


def test_absolute_paths_and_unset_ones_in_rungar_yaml_are_kept(config_dir: Path) -> None:
    settings = load_settings(str(config_dir / "rungar.yaml"))
    assert settings.github.app_private_key_path == ""
    absolute = dict(RUNGAR_YAML, socket="/run/rungar/rungar.sock")
    (config_dir / "rungar.yaml").write_text(yaml.safe_dump(absolute))
    assert load_settings(str(config_dir / "rungar.yaml")).socket == "/run/rungar/rungar.sock"


def test_a_relative_unix_provider_address_resolves_against_the_scale_sets_folder(
    config_dir: Path,
) -> None:
    config = load_scale_sets(config_dir / "scale_sets.yaml")
    by_name = {p.name: p for p in config.providers}
    assert by_name["local"].address == f"unix://{config_dir}/run/runnerd.sock"
    assert by_name["absolute"].address == "unix:///srv/runnerd.sock"
    assert by_name["remote"].address == "compute2.example.internal:7443"


def test_a_providers_tls_and_token_files_resolve_against_the_scale_sets_folder(
    config_dir: Path,
) -> None:
    remote = next(
        p for p in load_scale_sets(config_dir / "scale_sets.yaml").providers if p.name == "remote"
    )
    assert remote.options["tls"] == {
        "ca_file": str(config_dir / "tls" / "ca.pem"),
        "cert_file": str(config_dir / "tls" / "me.pem"),
        "key_file": str(config_dir / "tls" / "me.key"),
    }
    assert remote.options["token_file"] == str(config_dir / "secrets" / "runnerd-token")


def test_tls_is_refused_on_a_relative_unix_address_as_on_an_absolute_one(
    config_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = dict(SCALE_SETS)
    local: dict[str, object] = {"name": "local", "type": "runnerd", "address": "unix:r.sock"}
    bad["providers"] = [dict(local, tls={"ca_file": "ca.pem"})]
    (config_dir / "scale_sets.yaml").write_text(yaml.safe_dump(bad))
    assert rungar(["validate", str(config_dir / "scale_sets.yaml")]) == 2
    problems = capsys.readouterr().err.splitlines()
    assert len(problems) == 1, "the address itself is fine"
    assert "TLS is refused on a unix:// address" in problems[0]


def test_every_relative_path_in_runnerd_toml_resolves_against_its_folder(config_dir: Path) -> None:
    host = load_config(config_dir / "runnerd.toml").host
    assert host.state_dir == str(config_dir / "state")
    assert host.socket_path() == str(config_dir / "run" / "provider.sock")
    assert host.api_socket_path() == str(config_dir / "state" / "runnerd.sock")
    assert host.history_path() == str(config_dir / "state" / "history.db")
    assert (host.tls_cert, host.tls_key, host.tls_ca) == (
        str(config_dir / "tls" / "server.pem"),
        str(config_dir / "tls" / "server.key"),
        str(config_dir / "tls" / "ca.pem"),
    )
    assert host.token_file == str(config_dir / "secrets" / "token")
    assert host.cgroup_root == str(config_dir / "cgroup")
    assert host.proc_root == "/proc"


def test_validate_verbose_prints_the_resolved_paths_of_rungar_yaml_and_its_scale_sets(
    config_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert rungar(["validate", "--verbose", str(config_dir / "rungar.yaml")]) == 0
    out = capsys.readouterr().out
    assert "is valid: 3 providers, 1 scale set" in out
    for key, path in (
        ("socket", config_dir / "run" / "rungar.sock"),
        ("github.token_path", config_dir / "secrets" / "github-token"),
        ("state_dir", config_dir / "state"),
        ("providers.local.address", f"unix://{config_dir}/run/runnerd.sock"),
        ("providers.remote.tls.ca_file", config_dir / "tls" / "ca.pem"),
    ):
        assert any(line.split() == [key, str(path)] for line in out.splitlines()), (key, out)


def test_validate_verbose_json_carries_the_resolved_paths(
    config_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert rungar(["validate", "-v", "--json", str(config_dir / "scale_sets.yaml")]) == 0
    paths = json.loads(capsys.readouterr().out)["paths"]
    assert paths["providers.remote.token_file"] == str(config_dir / "secrets" / "runnerd-token")


def test_check_config_verbose_prints_the_paths_runnerd_will_open(config_dir: Path) -> None:
    # Its own process: runnerd's entry point configures logging for the whole interpreter.
    done = subprocess.run(
        [sys.executable, "-m", "runnerd.cli", "check-config", "-v", "-c", "../etc/runnerd.toml"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = [line.split() for line in done.stdout.splitlines()]
    assert ["host.socket", str(config_dir / "run" / "provider.sock")] in lines
    assert ["host.api_socket", str(config_dir / "state" / "runnerd.sock")] in lines
    assert ["host.tls_ca", str(config_dir / "tls" / "ca.pem")] in lines
    assert ["host.history", str(config_dir / "state" / "history.db")] in lines


def test_a_plugin_command_given_as_a_relative_path_resolves_against_the_scale_sets_folder(
    config_dir: Path,
) -> None:
    # Resolved against the working directory instead (as it once was), "./bin/my-provider"
    # names a file under "elsewhere" and this test fails.
    plugins = dict(
        SCALE_SETS,
        providers=[
            {"name": "mine", "type": "mine", "command": ["./bin/my-provider", "--flag", "x/y"]},
            {"name": "nested", "type": "mine", "command": ["plugins/other"]},
            {"name": "script", "type": "mine", "command": ["python3", "plugin.py"]},
            {"name": "pinned", "type": "mine", "command": ["/opt/plugins/mine"]},
        ],
        scale_sets=[{"name": "linux", "max_runners": 2, "providers": ["mine"]}],
    )
    (config_dir / "scale_sets.yaml").write_text(yaml.safe_dump(plugins))
    by_name = {p.name: p for p in load_scale_sets(config_dir / "scale_sets.yaml").providers}
    assert by_name["mine"].command == (str(config_dir / "bin" / "my-provider"), "--flag", "x/y")
    assert by_name["nested"].command == (str(config_dir / "plugins" / "other"),)
    assert by_name["script"].command == ("python3", "plugin.py")  # a PATH lookup, kept
    assert by_name["pinned"].command == ("/opt/plugins/mine",)
