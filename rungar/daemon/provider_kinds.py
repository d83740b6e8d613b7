"""Provider types served inside the daemon's own process, by type name.

The daemon's wiring knows gRPC providers only: an address, or a plugin it starts. A type that
runs in process — ``fake``, the scripted provider ``rungar demo``, the examples and the tests
use — is registered by the program that runs the daemon (the ``rungar`` command line, the
demo), so the engine never imports the test kit (docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from rungar.clock import Clock
from rungar.config.model import ProviderConfig
from rungar.model.provider import Provider

# Builds the provider a ``providers:`` entry names, on the daemon's clock.
InProcess = Callable[[ProviderConfig, Clock], Provider]


@dataclass(slots=True)
class ProviderKinds:
    """The in-process provider types one daemon may build; none unless a program adds them."""

    in_process: dict[str, InProcess] = field(default_factory=dict)

    def register(self, type_name: str, build: InProcess) -> None:
        self.in_process[type_name] = build

    def build(self, config: ProviderConfig, clock: Clock) -> Provider | None:
        """The in-process provider for ``config``, or None when it is reached over gRPC (it has
        an address or a command, or its type is not served in process)."""
        if config.address or config.command:
            return None
        build = self.in_process.get(config.type)
        return build(config, clock) if build is not None else None
