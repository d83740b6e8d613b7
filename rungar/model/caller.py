"""Who is calling a provider: the installation and the daemon instance behind each gRPC call.

Every call Rungar makes to a provider carries three metadata entries (documented in
provider.proto): the installation, the daemon's host and the daemon process's start time. Two
daemons (a second one started by mistake, or an old one not yet stopped) therefore look
different in a provider's logs. The server kit (:mod:`rungar.rpc.server`) reads them, logs them
on its ``provider.call`` line, and makes them the :func:`current_caller` of the provider method
it calls, so a provider written in Python can tell its callers apart too.
"""

from __future__ import annotations

import contextvars
import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

INSTALLATION_KEY = "rungar-installation"
HOST_KEY = "rungar-daemon-host"
STARTED_KEY = "rungar-daemon-started-at"  # epoch seconds, as a decimal string


@dataclass(frozen=True, slots=True)
class Caller:
    installation: str = ""
    host: str = ""
    started_at: float = 0.0  # when the daemon process started, epoch seconds; 0 = unknown

    def metadata(self) -> tuple[tuple[str, str], ...]:
        """The gRPC metadata a call carries."""
        return (
            (INSTALLATION_KEY, self.installation),
            (HOST_KEY, self.host),
            (STARTED_KEY, f"{self.started_at:.3f}"),
        )

    @classmethod
    def from_metadata(cls, entries: Iterable[tuple[str, str | bytes]]) -> Caller | None:
        """The caller named by a call's metadata; None when it names none (another client)."""
        found: dict[str, str] = {}
        for key, value in entries:
            if key in (INSTALLATION_KEY, HOST_KEY, STARTED_KEY):
                found[key] = value.decode(errors="replace") if isinstance(value, bytes) else value
        if not found:
            return None
        try:
            started = float(found.get(STARTED_KEY, "0"))
        except ValueError:
            started = 0.0
        return cls(found.get(INSTALLATION_KEY, ""), found.get(HOST_KEY, ""), started)

    def describe(self) -> str:
        """``gh-0123abcd on ci-1 (started 2026-09-28T10:16:40Z)``, for people."""
        when = ""
        if self.started_at:
            stamp = dt.datetime.fromtimestamp(self.started_at, dt.UTC)
            when = f" (started {stamp.strftime('%Y-%m-%dT%H:%M:%SZ')})"
        return f"{self.installation or '?'} on {self.host or '?'}{when}"


_current: contextvars.ContextVar[Caller | None] = contextvars.ContextVar(
    "rungar_provider_caller", default=None
)


def current_caller() -> Caller | None:
    """The daemon that made the provider call being served, inside a provider method; None
    outside a call or when the client named no caller."""
    return _current.get()


def set_current_caller(caller: Caller | None) -> contextvars.Token[Caller | None]:
    """For the server kit: the caller of the call about to be served (reset with the token)."""
    return _current.set(caller)


def reset_current_caller(token: contextvars.Token[Caller | None]) -> None:
    _current.reset(token)
