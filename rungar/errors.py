"""Rungar's error tree. Boundaries convert foreign exceptions into these once.

    RungarError
    ├── ConfigError            bad configuration: carries every problem, file:line:col each
    ├── ProviderError          a provider call went wrong
    │   └── ProviderUnavailable  no answer (connection refused, deadline, UNAVAILABLE)
    ├── GitHubError            GitHub refused or failed
    │   └── GitHubUnavailable    no answer from GitHub
    ├── StateError             the state store cannot be read or written
    ├── NotFound               an admin request names a scale set, provider or runner that is not
    ├── Busy                   an admin request conflicts with work under way
    └── FollowerBehind         an events follower let too many events pile up; it must ask again

Ordinary outcomes of pure code (a refusal, a skip reason) are values, never exceptions.
"""

from __future__ import annotations


class RungarError(Exception):
    """Base of every error Rungar raises on purpose."""


class ConfigError(RungarError):
    """A configuration file has problems; ``problems`` holds one line per problem."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


class ProviderError(RungarError):
    """A provider call failed in a way the provider did not describe as a refusal."""


class ProviderUnavailable(ProviderError):
    """The provider did not answer: its outcome, for a create, is unknown."""


class GitHubError(RungarError):
    """GitHub answered with an error."""

    def __init__(self, message: str, status: int | None = None) -> None:
        self.status = status
        super().__init__(message)


class GitHubUnavailable(GitHubError):
    """GitHub did not answer."""


class StateError(RungarError):
    """The state store failed."""


class NotFound(RungarError):
    """An admin request names a scale set, provider or runner the daemon does not have."""


class Busy(RungarError):
    """An admin request conflicts with work under way (a removal already running, ...)."""


class FollowerBehind(RungarError):
    """A follower let too many events pile up; it must ask again."""
