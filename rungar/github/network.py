"""How Rungar reaches GitHub: which proxy, if any, and which certificate authorities it trusts.

One :class:`Network` is worked out from ``rungar.yaml`` and the environment when a command
starts, and every GitHub call of that process goes by it: the daemon's, ``rungar doctor``'s and
the CLI's, so they cannot disagree (docs/operating.md, "Behind a proxy").

**The proxy** (docs/configuration.md, ``github.proxy``) is chosen as curl chooses one:

* ``github.proxy`` in rungar.yaml, when set, for every GitHub URL (``https://`` and ``http://``
  alike), with its credentials, if any, from ``github.proxy_credentials_path``;
* otherwise the environment's ``HTTPS_PROXY`` for ``https://`` URLs and ``HTTP_PROXY`` for
  ``http://`` ones (each name upper case first, then lower case, as the official client reads
  them; no fallback from one scheme to the other);
* ``NO_PROXY`` (or ``no_proxy``) names the hosts reached directly, whichever way the proxy was
  named: ``*`` for all; a host name for itself and every name under it (``ghe.corp`` is
  ``ghe.corp`` and ``api.ghe.corp``; ``.ghe.corp`` and ``*.ghe.corp`` only the names under it);
  an IP address or a CIDR block (``10.0.0.0/8``) for a host written as an address in it; any
  entry may end in ``:PORT`` to match that port only.

A proxy URL may be ``http://`` (the usual) or ``https://`` (TLS to the proxy, checked against
the same trust as GitHub); one written without a scheme is ``http://``. Proxy credentials are
never shown: :meth:`ProxyUse.shown` prints the URL without them.

**The trust**: the operating system's certificate authorities (OpenSSL's default paths, which
``SSL_CERT_FILE`` and ``SSL_CERT_DIR`` move) and certifi's bundle, which httpx ships with, so a
container without a CA store still reaches github.com; ``github.ca_file`` (a PEM bundle) is
added to them, or with ``github.ca_file_only`` trusted alone. There is no switch that skips
verification.
"""

from __future__ import annotations

import ipaddress
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

__all__ = [
    "Network",
    "NetworkError",
    "ProxyUse",
    "Route",
    "Trust",
    "parse_no_proxy",
    "parse_proxy_url",
]

KEY_SOURCE = "github.proxy"


class NetworkError(ValueError):
    """A proxy URL, credentials file or CA file that cannot be used: ``source`` is the key
    (``github.proxy``) or environment variable (``HTTPS_PROXY``), ``reason`` what is wrong."""

    def __init__(self, source: str, reason: str) -> None:
        self.source = source
        self.reason = reason
        super().__init__(f"{source}: {reason}")

    @property
    def key(self) -> str:
        """The key within ``github:``, or the environment variable's name."""
        return self.source.removeprefix("github.")


@dataclass(frozen=True, slots=True)
class ProxyUse:
    """A proxy and where it was named: ``github.proxy`` or an environment variable's name."""

    url: str  # scheme://host:port, never with credentials
    source: str
    auth: tuple[str, str] | None = field(default=None, repr=False)
    credentials_from: str = ""  # the file the credentials came from, or "the URL"

    def shown(self) -> str:
        """The proxy as Rungar prints it: no credentials, only where they come from."""
        where = "github.proxy in rungar.yaml" if self.source == KEY_SOURCE else self.source
        text = f"{self.url} ({where}"
        if self.auth is not None:
            text += f", credentials from {self.credentials_from}"
        return text + ")"


@dataclass(frozen=True, slots=True)
class Route:
    """How one URL is reached: through ``proxy`` or directly, and why, in a sentence."""

    proxy: ProxyUse | None
    why: str

    def shown(self) -> str:
        return self.proxy.shown() if self.proxy is not None else f"none ({self.why})"


@dataclass(frozen=True, slots=True)
class _Bypass:
    host: str  # lower case; "" with a network
    subdomains_only: bool
    network: ipaddress.IPv4Network | ipaddress.IPv6Network | None
    port: int | None
    text: str

    def matches(self, host: str, port: int) -> bool:
        if self.port is not None and self.port != port:
            return False
        if self.network is not None:
            try:
                return ipaddress.ip_address(host) in self.network
            except ValueError:
                return False
        if host == self.host:
            return not self.subdomains_only
        return host.endswith("." + self.host)


def parse_no_proxy(value: str) -> tuple[_Bypass, ...] | None:
    """``NO_PROXY``'s entries; None when it is ``*`` (every host direct)."""
    entries: list[_Bypass] = []
    for raw in value.split(","):
        text = raw.strip().lower()
        if not text:
            continue
        if text == "*":
            return None
        entries.append(_bypass(text))
    return tuple(entries)


def _bypass(text: str) -> _Bypass:
    entry, port = text, None
    if entry.startswith("["):  # [::1]:8080 or [::1]
        close = entry.find("]")
        rest = entry[close + 1 :]
        entry = entry[1:close]
        if rest.startswith(":") and rest[1:].isdigit():
            port = int(rest[1:])
    elif entry.count(":") == 1:
        head, _, tail = entry.partition(":")
        if tail.isdigit():
            entry, port = head, int(tail)
    try:
        network = ipaddress.ip_network(entry, strict=False)
    except ValueError:
        network = None
    if network is not None:
        return _Bypass("", False, network, port, text)
    subdomains_only = entry.startswith((".", "*."))
    host = entry.lstrip("*").lstrip(".")
    return _Bypass(host, subdomains_only, None, port, text)


def parse_proxy_url(value: str, source: str) -> tuple[str, tuple[str, str] | None]:
    """``value`` as ``scheme://host:port`` and the credentials it carried, or
    :class:`NetworkError` naming ``source``."""
    text = value.strip()
    if "://" not in text:
        text = "http://" + text
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as e:
        raise NetworkError(source, f"not a proxy URL ({e})") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise NetworkError(
            source,
            f"a {scheme}:// proxy is not supported; name an HTTP proxy "
            "(http://HOST:PORT, or https:// for TLS to the proxy)",
        )
    if not parts.hostname:
        raise NetworkError(source, "not a proxy URL (no host in it)")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise NetworkError(source, "a proxy URL is scheme://HOST:PORT, with no path")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    url = f"{scheme}://{host}:{port or (443 if scheme == 'https' else 80)}"
    auth = None
    if parts.username is not None or parts.password is not None:
        from urllib.parse import unquote

        auth = (unquote(parts.username or ""), unquote(parts.password or ""))
    return url, auth


def read_proxy_credentials(path: str) -> tuple[str, str]:
    """``USER:PASSWORD`` from the first line of ``path`` (the password may hold colons)."""
    try:
        with open(path, encoding="utf-8") as f:
            line = f.readline().strip()
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise NetworkError(
            "github.proxy_credentials_path", f"{path} cannot be read: {reason}"
        ) from None
    user, sep, password = line.partition(":")
    if not sep or not user:
        raise NetworkError(
            "github.proxy_credentials_path", f"{path} must hold USER:PASSWORD on its first line"
        )
    return user, password


def _env(environ: Mapping[str, str], name: str) -> tuple[str, str]:
    """The value of ``NAME`` or else ``name`` (an empty value is unset), and which one."""
    for key in (name.upper(), name.lower()):
        value = environ.get(key, "").strip()
        if value:
            return value, key
    return "", ""


@dataclass(frozen=True, slots=True)
class Trust:
    """The certificate authorities GitHub's certificates are checked against."""

    ca_file: str = ""
    ca_file_only: bool = False

    def shown(self) -> str:
        if not self.ca_file:
            return "the system's certificate authorities"
        if self.ca_file_only:
            return f"{self.ca_file} only (github.ca_file_only)"
        return f"the system's certificate authorities and {self.ca_file}"

    def context(self) -> ssl.SSLContext:
        """A client TLS context that verifies host names and certificates; :class:`NetworkError`
        when ``ca_file`` cannot be read or holds no certificate."""
        import certifi

        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        if self.ca_file_only:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        else:
            context.load_verify_locations(cafile=certifi.where())
        if self.ca_file:
            try:
                context.load_verify_locations(cafile=self.ca_file)
            except FileNotFoundError:
                raise NetworkError("github.ca_file", f"{self.ca_file} does not exist") from None
            except ssl.SSLError as e:
                raise NetworkError(
                    "github.ca_file", f"{self.ca_file} holds no PEM certificate ({e.reason or e})"
                ) from None
            except OSError as e:
                raise NetworkError(
                    "github.ca_file", f"{self.ca_file} cannot be read: {e.strerror or e}"
                ) from None
        return context


@dataclass(frozen=True, slots=True)
class Network:
    """The proxy rules and the trust of one process's GitHub calls."""

    https: ProxyUse | None = None
    http: ProxyUse | None = None
    no_proxy: tuple[_Bypass, ...] | None = ()  # None: NO_PROXY=* (nothing through a proxy)
    no_proxy_source: str = ""
    trust: Trust = Trust()
    # An environment variable whose URL cannot be used, by the scheme it serves: raised when a
    # URL of that scheme is routed, so an unusable HTTP_PROXY stops no https:// GitHub.
    unusable: tuple[tuple[str, NetworkError], ...] = ()

    @classmethod
    def from_settings(
        cls,
        proxy: str,
        proxy_credentials_path: str,
        ca_file: str,
        ca_file_only: bool,
        environ: Mapping[str, str],
    ) -> Network:
        """From the ``github.*`` keys and the environment; :class:`NetworkError` for a proxy
        URL or credentials file that cannot be used (:meth:`Trust.context` reads the CA file)."""
        no_proxy_text, no_proxy_source = _env(environ, "no_proxy")
        trust = Trust(ca_file, ca_file_only)
        bypass = parse_no_proxy(no_proxy_text)
        if proxy:
            url, auth = parse_proxy_url(proxy, KEY_SOURCE)
            if auth is not None:
                raise NetworkError(
                    "github.proxy",
                    "the URL holds credentials; put USER:PASSWORD in a file "
                    "named by github.proxy_credentials_path instead",
                )
            credentials_from = ""
            if proxy_credentials_path:
                auth = read_proxy_credentials(proxy_credentials_path)
                credentials_from = proxy_credentials_path
            use = ProxyUse(url, KEY_SOURCE, auth, credentials_from)
            return cls(use, use, bypass, no_proxy_source, trust)
        if proxy_credentials_path:
            raise NetworkError("github.proxy_credentials_path", "set without github.proxy")
        found: dict[str, ProxyUse | None] = {"https": None, "http": None}
        unusable = []
        for scheme in found:
            value, name = _env(environ, f"{scheme}_proxy")
            if not value:
                continue
            try:
                url, auth = parse_proxy_url(value, name)
            except NetworkError as e:
                unusable.append((scheme, e))
                continue
            found[scheme] = ProxyUse(url, name, auth, "the URL" if auth else "")
        return cls(found["https"], found["http"], bypass, no_proxy_source, trust, tuple(unusable))

    def route(self, url: str) -> Route:
        """Through which proxy ``url`` goes, or why directly; :class:`NetworkError` when the
        environment's variable for its scheme is not a usable proxy URL."""
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        host = (parts.hostname or "").lower()
        port = parts.port or (443 if scheme == "https" else 80)
        return self.route_to(scheme, host, port)

    def route_to(self, scheme: str, host: str, port: int) -> Route:
        for unusable_scheme, error in self.unusable:
            if unusable_scheme == scheme:
                raise error
        proxy = self.https if scheme == "https" else self.http
        if proxy is None:
            variable = "HTTPS_PROXY" if scheme == "https" else "HTTP_PROXY"
            return Route(None, f"no github.proxy, no {variable} in the environment")
        if self.no_proxy is None:
            return Route(None, f"{self.no_proxy_source}=* sends every host directly")
        for entry in self.no_proxy:
            if entry.matches(host, port):
                return Route(None, f"{host} matches {self.no_proxy_source} entry {entry.text}")
        return Route(proxy, "")
