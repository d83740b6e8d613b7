"""Whether a provider is in placement at all: reachable (its last List answered, no call since
went unanswered) and enabled (its configured ``disabled``, or a runtime switch of ``rungar
providers disable|enable|drain`` kept until the daemon restarts)."""

from __future__ import annotations

from collections.abc import Mapping

from rungar.config.model import ProviderConfig
from rungar.model.sentences import DISABLED, UNREACHABLE


class Switches:
    """Unreachable providers and runtime switches over the configured ``providers``."""

    def __init__(self) -> None:
        self.providers: Mapping[str, ProviderConfig] = {}
        self._unreachable: set[str] = set()
        self._disabled: set[str] = set()  # disabled at runtime, enabled in the configuration
        self._enabled: set[str] = set()  # enabled at runtime, disabled in the configuration

    def set_disabled(self, provider: str, disabled: bool) -> None:
        self._disabled.discard(provider)
        self._enabled.discard(provider)
        configured = self.providers[provider].disabled
        if disabled and not configured:
            self._disabled.add(provider)
        elif not disabled and configured:
            self._enabled.add(provider)

    def is_disabled(self, provider: str) -> bool:
        if provider in self._disabled:
            return True
        if provider in self._enabled:
            return False
        return self.providers[provider].disabled

    def disabled_at_runtime(self, provider: str) -> bool | None:
        """True/False when a runtime switch overrides the configuration, else None."""
        if provider in self._disabled:
            return True
        if provider in self._enabled:
            return False
        return None

    def out_of_placement(self, provider: str) -> str | None:
        """Why no scale set tries ``provider`` now (disabled, then unreachable), or None."""
        if self.is_disabled(provider):
            return DISABLED
        if provider in self._unreachable:
            return UNREACHABLE
        return None

    def set_reachable(self, provider: str, reachable: bool) -> bool:
        """Record a List's answer (or any call's silence); True when its state changed."""
        was = provider not in self._unreachable
        if reachable:
            self._unreachable.discard(provider)
        else:
            self._unreachable.add(provider)
        return was != reachable

    def is_reachable(self, provider: str) -> bool:
        return provider not in self._unreachable
