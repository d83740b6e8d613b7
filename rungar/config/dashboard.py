"""The ``dashboard:`` block of scale_sets.yaml: where the fleet page listens, and who may see it.

The rule is the provider channel's: on loopback the page is plain HTTP, for whoever can reach
the host's loopback; on any other address it needs TLS (``tls.cert_file`` and ``tls.key_file``)
and a way to tell clients apart, a token (``token_file``) or client certificates
(``tls.client_ca_file``), or both. A problem is reported at the key that causes it.
"""

from __future__ import annotations

import ipaddress
from dataclasses import replace
from pathlib import Path

from rungar.config.model import DashboardConfig
from rungar.config.paths import resolve_path
from rungar.config.validate import Checker, Record

LOOPBACK_NAMES = frozenset({"localhost", "ip6-localhost"})


def listen_host(listen: str) -> str:
    """The host part of ``host:port`` (``[v6]:port`` too); "" for ``:port`` (every address)."""
    host, _, _ = listen.rpartition(":")
    return host.strip("[]")


def is_loopback(listen: str) -> bool:
    host = listen_host(listen)
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # "" (every address), 0.0.0.0 or a name: beyond loopback


def dashboard_config(record: Record | None, checker: Checker) -> DashboardConfig:
    """The block's values, with every problem of it added to ``checker``."""
    if record is None:
        return DashboardConfig()
    tls = record.get("tls")
    tls_values = tls.values if isinstance(tls, Record) else {}
    listen = record.get("listen", "")
    default = DashboardConfig()
    config = DashboardConfig(
        listen=listen,
        cert_file=tls_values.get("cert_file", ""),
        key_file=tls_values.get("key_file", ""),
        client_ca_file=tls_values.get("client_ca_file", ""),
        token_file=record.get("token_file", ""),
        refresh=record.get("refresh", default.refresh),
        history=record.get("history", default.history),
        max_connections=record.get("max_connections", default.max_connections),
        max_streams=record.get("max_streams", default.max_streams),
    )
    if isinstance(tls, Record) and bool(config.cert_file) != bool(config.key_file):
        missing = "key_file" if config.cert_file else "cert_file"
        present = "cert_file" if config.cert_file else "key_file"
        checker.fail(tls.mark_of(present), tls.path_of(missing), f"is needed with {present}")
    if listen and not is_loopback(listen):
        if not (config.cert_file and config.key_file):
            checker.fail(
                record.mark_of("listen"),
                record.path_of("listen"),
                f"{listen} is beyond loopback: the fleet page there needs tls.cert_file and "
                "tls.key_file, and token_file or tls.client_ca_file",
            )
        elif not (config.token_file or config.client_ca_file):
            checker.fail(
                record.mark_of("listen"),
                record.path_of("listen"),
                f"{listen} is beyond loopback: the fleet page there needs token_file or "
                "tls.client_ca_file, so not everyone who reaches the port may look",
            )
    return config


def resolve_dashboard(config: DashboardConfig, base: Path) -> DashboardConfig:
    """Its files resolved against ``base``, the folder of scale_sets.yaml."""
    return replace(
        config,
        cert_file=resolve_path(config.cert_file, base),
        key_file=resolve_path(config.key_file, base),
        client_ca_file=resolve_path(config.client_ca_file, base),
        token_file=resolve_path(config.token_file, base),
    )
