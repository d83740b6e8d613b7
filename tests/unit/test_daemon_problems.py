"""A problem found while the daemon starts names the file its key is in (``FILE: key: problem``)."""

from __future__ import annotations

from rungar.daemon.daemon import Daemon
from rungar.daemon.settings import DaemonSettings

SETTINGS = DaemonSettings.model_validate(
    {
        "github": {"url": "http://127.0.0.1:1/acme", "token_env": "T"},
        "scale_sets": "/etc/rungar/scale_sets.yaml",
    }
)
DAEMON = Daemon(SETTINGS, settings_path="/etc/rungar/rungar.yaml")


def test_a_key_of_rungar_yaml_names_the_settings_file() -> None:
    for problem in (
        "metrics.listen: cannot listen on 127.0.0.1:9090: in use",
        "socket: /run/rungar/rungar.sock is in use: another rungar daemon listens there",
        "github.token_env: $T is empty or unset",
    ):
        assert DAEMON.where(problem) == f"/etc/rungar/rungar.yaml: {problem}"


def test_a_provider_or_the_dashboard_names_the_scale_sets_file() -> None:
    for problem in ("providers.gce: its plugin did not start: exit 3", "dashboard.listen: x"):
        assert DAEMON.where(problem) == f"/etc/rungar/scale_sets.yaml: {problem}"


def test_a_problem_naming_its_file_or_no_key_is_left_as_it_is() -> None:
    for problem in (
        "/etc/rungar/scale_sets.yaml:3:5: scale_sets[0].max_runners: is required",
        "/etc/rungar/rungar.yaml: socket: longer than 103 characters",
        "something went wrong",
    ):
        assert DAEMON.where(problem) == problem


def test_without_a_settings_file_a_key_of_rungar_yaml_stays_bare() -> None:
    assert Daemon(SETTINGS).where("metrics.listen: x") == "metrics.listen: x"


def test_a_scale_sets_file_named_like_a_key_is_still_a_file() -> None:
    relative = SETTINGS.model_copy(update={"scale_sets": "scale_sets.yaml"})
    problem = "scale_sets.yaml:3:5: scale_sets[0].max_runners: is required"
    assert Daemon(relative, settings_path="rungar.yaml").where(problem) == problem
