"""The deadline of each call kind to a provider, as the configuration reference names them.

- ``Create``: what is left of its scale set's ``start_timeout``: the engine puts it in the
  request and ends a Create that overruns it (the one create timeout, on its clock);
- ``Delete``: ``timing.delete_timeout``;
- ``List``, ``Info``, ``ValidateRunner``, ``UpdateRunner``: the provider's ``timeout``, else
  ``timing.provider_timeout``.

``rungar apply`` changes them live: the provider clients are handed the new ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rungar.config.model import ProviderConfig, Timing
from rungar.model.caller import Caller

if TYPE_CHECKING:
    from rungar.rpc.client import GrpcProvider
    from rungar.rpc.tls import ClientTls


@dataclass(frozen=True, slots=True)
class CallTimeouts:
    timeout: float  # List, Info, ValidateRunner, UpdateRunner
    delete_timeout: float

    def client(
        self,
        name: str,
        address: str,
        tls: ClientTls | None = None,
        token: str = "",
        caller: Caller | None = None,
    ) -> GrpcProvider:
        from rungar.rpc.client import GrpcProvider

        return GrpcProvider(
            name,
            address,
            tls=tls,
            token=token,
            timeout=self.timeout,
            delete_timeout=self.delete_timeout,
            caller=caller,
        )

    def apply(self, client: GrpcProvider) -> None:
        client.set_timeouts(timeout=self.timeout, delete_timeout=self.delete_timeout)


def call_timeouts(config: ProviderConfig, timing: Timing) -> CallTimeouts:
    """The deadlines of this provider's calls under ``timing``."""
    return CallTimeouts(
        timeout=config.timeout or timing.provider_timeout,
        delete_timeout=timing.delete_timeout,
    )


def retime(provider: Any, config: ProviderConfig, timing: Timing) -> None:
    """Hand a provider client its calls' deadlines under a new configuration; a provider that
    runs in-process (the fake) has none."""
    from rungar.rpc.client import GrpcProvider

    timeouts = call_timeouts(config, timing)
    if isinstance(provider, GrpcProvider):
        timeouts.apply(provider)
    elif hasattr(provider, "set_timeouts"):
        provider.set_timeouts(timeouts)  # a plugin's provider: it hands them to its client
