"""Config URL → scope and REST base (docs/github.md)."""

from __future__ import annotations

import pytest

from rungar.errors import ConfigError
from rungar.github.urls import Scope, parse_config_url


@pytest.mark.parametrize(
    ("url", "scope", "scope_path", "rest_base", "hosted"),
    [
        (
            "https://github.com/octo",
            Scope.ORGANIZATION,
            "orgs/octo",
            "https://api.github.com",
            True,
        ),
        (
            "https://github.com/octo/app/",
            Scope.REPOSITORY,
            "repos/octo/app",
            "https://api.github.com",
            True,
        ),
        (
            "https://www.github.com/octo",
            Scope.ORGANIZATION,
            "orgs/octo",
            "https://api.github.com",
            True,
        ),
        (
            "https://github.com/enterprises/acme",
            Scope.ENTERPRISE,
            "enterprises/acme",
            "https://api.github.com",
            True,
        ),
        (
            "https://acme.ghe.com/octo",
            Scope.ORGANIZATION,
            "orgs/octo",
            "https://api.acme.ghe.com",
            True,
        ),
        (
            "https://ghes.corp.example/octo",
            Scope.ORGANIZATION,
            "orgs/octo",
            "https://ghes.corp.example/api/v3",
            False,
        ),
        (
            "http://127.0.0.1:8765/octo-org",
            Scope.ORGANIZATION,
            "orgs/octo-org",
            "http://127.0.0.1:8765/api/v3",
            False,
        ),
    ],
)
def test_config_urls_map_to_their_scope_and_rest_base(
    url: str, scope: Scope, scope_path: str, rest_base: str, hosted: bool
) -> None:
    target = parse_config_url(url, force_ghes=False)
    assert (target.scope, target.scope_path, target.rest_base, target.hosted) == (
        scope,
        scope_path,
        rest_base,
        hosted,
    )
    assert target.config_url == url.strip("/")


def test_forcing_ghes_treats_github_com_as_a_server() -> None:
    assert (
        parse_config_url("https://github.com/octo", force_ghes=True).rest_base
        == "https://github.com/api/v3"
    )


@pytest.mark.parametrize(
    "url", ["https://github.com", "https://github.com/a/b/c", "ftp://github.com/a", "octo"]
)
def test_a_url_of_any_other_shape_is_a_config_error(url: str) -> None:
    with pytest.raises(ConfigError):
        parse_config_url(url, force_ghes=False)


def test_github_localhost_keeps_its_scheme_as_the_official_clients_do() -> None:
    # Before: a hosted host always went to https, so a local GitHub on http was unreachable.
    target = parse_config_url("http://github.localhost/octo", force_ghes=False)
    assert (target.rest_base, target.hosted) == ("http://api.github.localhost", True)
    assert parse_config_url("http://GitHub.localhost/octo", force_ghes=False).rest_base == (
        "http://api.GitHub.localhost"
    )
    # A port makes the host a server of its own: the official clients compare host and port.
    assert parse_config_url("http://github.localhost:8080/octo", force_ghes=False).rest_base == (
        "http://github.localhost:8080/api/v3"
    )


def test_force_ghes_set_to_anything_even_empty_forces_the_server_rules(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS_FORCE_GHES", "")
    assert parse_config_url("https://github.com/octo").rest_base == "https://github.com/api/v3"
    monkeypatch.delenv("GITHUB_ACTIONS_FORCE_GHES")
    assert parse_config_url("https://github.com/octo").rest_base == "https://api.github.com"
