"""Transport security of the provider channel (docs/operating.md).

Two ways to secure a TCP provider channel, both over TLS with the server's certificate checked
against a CA and a server name:

* **mTLS**: the client presents a certificate the server checks against its client CA
  (``require_client_auth``); the server presents one the client checks.
* **bearer token over TLS**: the client sends ``authorization: Bearer <token>``; the server
  compares it in constant time (see :mod:`rungar.rpc.server`).

Plaintext is only ever allowed on ``unix://`` addresses, where file permissions guard access.
This module holds the settings as values and builds grpc credentials from them; it reads the
files when credentials are built, so a rotated certificate is picked up on the next connect.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import grpc

from rungar.config.schema import unix_path_problem
from rungar.errors import ConfigError

UNIX_SCHEME = "unix://"


@dataclass(frozen=True, slots=True)
class ClientTls:
    """How Rungar checks a provider and proves itself to it.

    ``ca_file`` verifies the provider's certificate; ``cert_file``/``key_file`` (both or neither)
    are the client certificate for mTLS; ``server_name`` overrides the name checked in the
    provider's certificate (default: the address's host).
    """

    ca_file: str
    cert_file: str = ""
    key_file: str = ""
    server_name: str = ""


@dataclass(frozen=True, slots=True)
class ServerTls:
    """A provider's certificate, and the CA its clients' certificates must chain to.

    With ``client_ca_file`` set, a client without a certificate from that CA is refused during
    the handshake (mTLS). Without it, clients are authenticated by a token instead.
    """

    cert_file: str
    key_file: str
    client_ca_file: str = ""


def is_unix(address: str) -> bool:
    return address.startswith(UNIX_SCHEME)


def unix_path(address: str) -> str:
    """The socket path of a ``unix:///path`` address."""
    if not is_unix(address):
        raise ValueError(f"{address!r} is not a unix:// address")
    path = address[len(UNIX_SCHEME) :]
    if not path.startswith("/"):
        raise ValueError(f"{address!r}: a unix socket address needs an absolute path")
    return path


def check_address(address: str, *, secured: bool, who: str) -> None:
    """Refuse an address that would carry the provider protocol in plaintext over TCP."""
    if not address:
        raise ConfigError([f"{who}: no address"])
    if is_unix(address):
        try:
            unix_path(address)
        except ValueError as e:
            raise ConfigError([f"{who}: {e}"]) from e
        too_long = unix_path_problem(address)
        if too_long:
            raise ConfigError([f"{who}: {address}: {too_long}"])
        return
    if "://" in address:
        raise ConfigError([f"{who}: {address!r}: use unix:///path or host:port"])
    if not secured:
        raise ConfigError(
            [
                f"{who}: {address!r} is a TCP address and needs TLS (a CA, and a client "
                "certificate or a token); plaintext is only allowed on unix:// sockets"
            ]
        )


def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise ConfigError([f"{what} {path}: {e.strerror or e}"]) from e


def channel_credentials(tls: ClientTls) -> grpc.ChannelCredentials:
    if bool(tls.cert_file) != bool(tls.key_file):
        raise ConfigError(["tls: cert_file and key_file go together"])
    return grpc.ssl_channel_credentials(
        root_certificates=_read(tls.ca_file, "tls ca_file"),
        private_key=_read(tls.key_file, "tls key_file") if tls.key_file else None,
        certificate_chain=_read(tls.cert_file, "tls cert_file") if tls.cert_file else None,
    )


def server_credentials(tls: ServerTls) -> grpc.ServerCredentials:
    key = _read(tls.key_file, "tls key_file")
    cert = _read(tls.cert_file, "tls cert_file")
    if tls.client_ca_file:
        return grpc.ssl_server_credentials(
            [(key, cert)],
            root_certificates=_read(tls.client_ca_file, "tls client_ca_file"),
            require_client_auth=True,
        )
    return grpc.ssl_server_credentials([(key, cert)])
