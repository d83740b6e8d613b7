"""The GitHub answers that callers act on, as :class:`rungar.errors.GitHubError` subclasses.

The Actions service names its failures with a .NET exception type in ``typeName``; clients match
by substring (docs/github.md). Each class below is one such answer that changes what
the caller does next; everything else stays a plain :class:`GitHubError` with its status.
"""

from __future__ import annotations

from rungar.errors import GitHubError, GitHubUnavailable


class SessionConflict(GitHubError):
    """409 on session create: another live session owns the scale set (ARC #3209): stand by.

    ``holder`` is the owner GitHub names for that session ("... already has an active session
    for owner NAME."), or "" when its answer names none."""

    def __init__(self, message: str, status: int | None = None, holder: str = "") -> None:
        super().__init__(message, status)
        self.holder = holder


class SessionGone(GitHubError):
    """The message session was evicted or expired server-side (scaleset #123): open a new one."""


class ScaleSetGone(GitHubError):
    """``RunnerScaleSetNotFoundException``: the scale set was deleted on GitHub (ARC #3935)."""


class GarbledAnswer(GitHubError):
    """A 200 from the message queue with an empty or unreadable body (ARC #4285, #4470).

    Not "no message": the listener treats it as a failed turn of the session, backs off, and
    re-creates the session when it keeps happening.
    """


class MessageQueueTokenExpired(GitHubError):
    """401 from the message queue or acquire: refresh the session and retry once."""


class RunnerExists(GitHubError):
    """409 ``AgentExistsException`` on generate-jitconfig: the runner name is taken."""


class RunnerBusy(GitHubError):
    """400 ``JobStillRunningException`` on remove: the runner has a job; try later."""


class RegistrationThrottled(GitHubError):
    """429 (or a rate-limited 403) on generate-jitconfig: GitHub's registration throttle.

    Not waited out in the transport: the registration queue learns the pace from it and the
    registration waits for another turn (docs/github.md, "Registration pace")."""

    def __init__(self, message: str, status: int | None = None, retry_after: float = 0.0) -> None:
        super().__init__(message, status)
        self.retry_after = retry_after


class GitHubUnreachable(GitHubUnavailable):
    """A request that got no HTTP answer: refused, timed out, a certificate not trusted, a
    proxy that failed (:mod:`rungar.github.http` words it). Retried as transient; its message
    is for the user, and never holds a proxy's credentials."""
