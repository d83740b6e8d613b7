"""Config URL → scope and REST base (protocol spec §1.1)."""

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
