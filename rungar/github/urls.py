"""From the configured GitHub URL to its scope and REST base (docs/github.md).

A single *config URL* says what Rungar registers runners for: ``https://github.com/ORG`` (an
organization), ``https://github.com/ORG/REPO`` (a repository) or
``https://github.com/enterprises/ENT`` (an enterprise). Its host picks the REST base, by the
official clients' rules: ``github.com``, ``www.github.com`` and ``github.localhost`` (any case)
and ``*.ghe.com`` use ``<scheme>://api.<host>`` (``www.github.com`` maps to ``api.github.com``),
keeping the URL's scheme and port, so ``http://github.localhost/ORG`` talks to
``http://api.github.localhost``; any other host is GHES and uses ``<scheme>://<host>/api/v3``.
``GITHUB_ACTIONS_FORCE_GHES`` set in the environment, to any value, even empty, makes every host
GHES. Keeping the GHES rule lets the same client talk to the loopback emulator
(``http://127.0.0.1:PORT/ORG`` → ``http://127.0.0.1:PORT/api/v3``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import urlsplit

from rungar.errors import ConfigError

FORCE_GHES_ENV = "GITHUB_ACTIONS_FORCE_GHES"
_HOSTED = frozenset({"github.com", "www.github.com", "github.localhost"})


class Scope(StrEnum):
    ORGANIZATION = "organization"
    REPOSITORY = "repository"
    ENTERPRISE = "enterprise"


@dataclass(frozen=True, slots=True)
class GitHubTarget:
    """What the config URL designates, and where its REST API lives."""

    config_url: str  # trimmed, exactly what runner-registration is told
    scope: Scope
    owner: str  # the organization, the repository owner, or the enterprise slug
    repository: str  # empty unless scope is REPOSITORY
    rest_base: str  # no trailing slash
    hosted: bool  # github.com or GHE.com (False: GHES, or the emulator)

    @property
    def scope_path(self) -> str:
        """The REST prefix of the runner endpoints: ``orgs/o``, ``repos/o/r``, ``enterprises/e``."""
        if self.scope is Scope.REPOSITORY:
            return f"repos/{self.owner}/{self.repository}"
        if self.scope is Scope.ENTERPRISE:
            return f"enterprises/{self.owner}"
        return f"orgs/{self.owner}"


def _is_hosted(host: str) -> bool:
    """``host`` is the URL's host *with* its port, as the official clients compare it."""
    return host.lower() in _HOSTED or host.endswith(".ghe.com")


def rest_base_for(scheme: str, netloc: str, *, force_ghes: bool = False) -> tuple[str, bool]:
    """The REST base for a host, and whether the host is GitHub-hosted."""
    host = netloc.split("@")[-1]
    if not force_ghes and _is_hosted(host):
        api_host = "api.github.com" if host.lower() == "www.github.com" else f"api.{host}"
        return f"{scheme}://{api_host}", True
    return f"{scheme}://{netloc}/api/v3", False


def parse_config_url(url: str, *, force_ghes: bool | None = None) -> GitHubTarget:
    """Parse a config URL or raise :class:`ConfigError` naming what is wrong with it."""
    trimmed = url.strip().strip("/")
    parts = urlsplit(trimmed)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(
            [f"github url {url!r}: must be an http(s) URL such as https://github.com/ORG"]
        )
    segments = [s for s in parts.path.split("/") if s]
    if force_ghes is None:
        force_ghes = FORCE_GHES_ENV in os.environ  # set at all, as the official clients read it
    rest_base, hosted = rest_base_for(parts.scheme, parts.netloc, force_ghes=force_ghes)
    if len(segments) == 2 and segments[0].lower() == "enterprises":
        scope, owner, repository = Scope.ENTERPRISE, segments[1], ""
    elif len(segments) == 1:
        scope, owner, repository = Scope.ORGANIZATION, segments[0], ""
    elif len(segments) == 2:
        scope, owner, repository = Scope.REPOSITORY, segments[0], segments[1]
    else:
        raise ConfigError(
            [
                f"github url {url!r}: the path must be /ORG, /OWNER/REPO or /enterprises/ENT, "
                f"not {parts.path or '/'!r}"
            ]
        )
    return GitHubTarget(
        config_url=trimmed,
        scope=scope,
        owner=owner,
        repository=repository,
        rest_base=rest_base,
        hosted=hosted,
    )
