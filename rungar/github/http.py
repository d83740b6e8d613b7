"""Every GitHub call's HTTP: httpx, routed by :class:`~rungar.github.network.Network`.

:func:`github_http` builds the one client a process uses for GitHub (the daemon's client and
listeners, ``rungar doctor``, the CLI). Each request goes through the proxy its URL's route
names, or directly; every pool verifies certificates against the network's trust. httpx's
exceptions stop here: :class:`HttpxSender` turns each into a :class:`GitHubUnreachable` whose
message says what failed, where, and what to check (a certificate not trusted names the host
and the CA file; a proxy that does not answer names the proxy and where it was configured),
so nothing above this module sees an httpx type.

The pools: one per origin and route, so the listeners' long polls (on GitHub's message broker)
and the REST and Actions-service calls do not share a pool, and httpcore's walk over a pool's
connections at each request is over that origin's alone; no cap on connections (every scale
set's listener holds one in a 50-second long poll, so a cap would leave calls waiting behind
them); every connection kept alive between calls until idle ``keepalive_expiry`` seconds
(httpcore counts all of a pool's connections against its keep-alive bound, busy ones
included, so any bound would close a burst's connections after each call and reopen them).
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from rungar.github.exceptions import GitHubUnreachable
from rungar.github.network import Network, NetworkError, ProxyUse, Route
from rungar.github.wire import decode_json

__all__ = ["HttpxSender", "Response", "RoutedTransport", "github_http", "http_client"]

KEEPALIVE_EXPIRY = 5.0


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    headers: Mapping[str, str]
    body: bytes = field(repr=False)

    def json(self) -> Any:
        return decode_json(self.body)

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


class RoutedTransport(httpx.AsyncBaseTransport):
    """Sends each request through the proxy its URL's route names, or directly."""

    def __init__(self, network: Network, limits: httpx.Limits) -> None:
        self.network = network
        self._limits = limits
        self._context: ssl.SSLContext | None = None
        self._pools: dict[tuple[str, str, str, int], httpx.AsyncHTTPTransport] = {}
        self._routes: dict[tuple[str, str, int], Route] = {}

    def ssl_context(self) -> ssl.SSLContext:
        if self._context is None:
            self._context = self.network.trust.context()
        return self._context

    def route(self, url: httpx.URL) -> Route:
        key = (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80))
        found = self._routes.get(key)
        if found is None:
            found = self._routes[key] = self.network.route_to(*key)
        return found

    def _pool(self, proxy: ProxyUse | None, url: httpx.URL) -> httpx.AsyncHTTPTransport:
        key = (proxy.url if proxy is not None else "", url.scheme, url.host, url.port or 0)
        pool = self._pools.get(key)
        if pool is None:
            context = self.ssl_context()
            through = None
            if proxy is not None:
                tls_to_proxy = context if proxy.url.startswith("https:") else None
                through = httpx.Proxy(proxy.url, auth=proxy.auth, ssl_context=tls_to_proxy)
            pool = self._pools[key] = httpx.AsyncHTTPTransport(
                verify=context, trust_env=False, limits=self._limits, proxy=through
            )
        return pool

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        return await self._pool(self.route(url).proxy, url).handle_async_request(request)

    async def aclose(self) -> None:
        pools, self._pools = self._pools, {}
        for pool in pools.values():
            await pool.aclose()


class HttpxSender:
    """A :class:`~rungar.github.transport.Sender` over an ``httpx.AsyncClient``: the answer read
    whole, httpx's exceptions turned into :class:`GitHubUnreachable`."""

    def __init__(self, http: httpx.AsyncClient, network: Network | None = None) -> None:
        self.http = http
        self.network = network

    async def send(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes = b"",
        params: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Response:
        try:
            raw = await self.http.request(
                method,
                url,
                headers=headers,
                content=body or None,
                params=params,
                timeout=httpx.USE_CLIENT_DEFAULT if timeout is None else timeout,
            )
        except httpx.HTTPError as e:
            raise GitHubUnreachable(describe_failure(e, url, self.network)) from e
        except ssl.SSLError as e:  # raised outside httpx's mapping (a handshake on close)
            raise GitHubUnreachable(describe_failure(e, url, self.network)) from e
        except NetworkError as e:  # the environment's proxy for this URL's scheme is unusable
            raise GitHubUnreachable(str(e)) from e
        return Response(
            raw.status_code, {k.lower(): v for k, v in raw.headers.items()}, raw.content
        )

    async def aclose(self) -> None:
        await self.http.aclose()


def github_http(
    network: Network, timeout: float = 30.0, *, keepalive_expiry: float = KEEPALIVE_EXPIRY
) -> HttpxSender:
    """The HTTP client of every GitHub call of a process. ``timeout`` is for a request that
    names none (the transport names one always). The CA file is read here: a bad one raises
    :class:`~rungar.github.network.NetworkError` before any call is made."""
    limits = httpx.Limits(
        max_connections=None, max_keepalive_connections=None, keepalive_expiry=keepalive_expiry
    )
    routed = RoutedTransport(network, limits)
    routed.ssl_context()
    client = httpx.AsyncClient(transport=routed, timeout=timeout, trust_env=False)
    return HttpxSender(client, network)


def http_client(timeout: float = 30.0, network: Network | None = None) -> HttpxSender:
    """:func:`github_http` for ``network``, or by default for the environment alone (its
    ``HTTPS_PROXY``, ``HTTP_PROXY`` and ``NO_PROXY``; no key of rungar.yaml)."""
    if network is None:
        network = Network.from_settings("", "", "", False, os.environ)
    return github_http(network, timeout)


# ---- what went wrong, in words --------------------------------------------------------------


def _causes(e: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = e
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def describe_failure(e: BaseException, url: str, network: Network | None) -> str:
    """One sentence (or two) for a request to ``url`` that got no answer: what, where, and
    what to check. Never the proxy's credentials: :meth:`ProxyUse.shown` leaves them out."""
    parsed = httpx.URL(url)
    host = parsed.host
    where = f"{host}:{parsed.port}" if parsed.port else host
    try:
        route = network.route(url) if network is not None else None
    except NetworkError:
        route = None
    proxy = route.proxy if route is not None else None
    causes = _causes(e)
    certificate = next((c for c in causes if isinstance(c, ssl.SSLCertVerificationError)), None)
    if certificate is not None:
        return _certificate_failure(certificate, host, network, proxy)
    tls = next((c for c in causes if isinstance(c, ssl.SSLError)), None)
    reason = _reason(e)
    if isinstance(e, httpx.ProxyError) and proxy is not None:
        return (
            f"the proxy {proxy.shown()} refused the tunnel to {where}: {reason}; check the "
            "proxy's access rules for this host, and its credentials "
            "(github.proxy_credentials_path)"
        )
    if isinstance(e, httpx.ConnectError | httpx.ConnectTimeout) and proxy is not None:
        return (
            f"cannot reach {where} through the proxy {proxy.shown()}: {reason}; check that the "
            "proxy runs and answers at that address, or list the host in NO_PROXY to reach it "
            "directly"
        )
    if tls is not None:
        return f"TLS with {where} failed: {tls.reason or tls}"
    if isinstance(e, httpx.TimeoutException):
        return f"{where} did not answer in time ({type(e).__name__})"
    if isinstance(e, httpx.ConnectError):
        return f"cannot connect to {where}: {reason}"
    return f"{where}: {type(e).__name__}: {reason}"


def _reason(e: BaseException) -> str:
    text = str(e).strip()
    for cause in _causes(e)[1:]:
        if not text:
            text = str(cause).strip()
    return text or type(e).__name__


def _certificate_failure(
    error: ssl.SSLCertVerificationError,
    host: str,
    network: Network | None,
    proxy: ProxyUse | None,
) -> str:
    problem = error.verify_message or error.reason or str(error)
    trust = network.trust if network is not None else None
    trusted = trust.shown() if trust is not None else "the system's certificate authorities"
    if trust is not None and trust.ca_file:
        check = (
            f"check that {trust.ca_file} holds, in PEM, the CA that signed {host}'s certificate "
            "(and any intermediate CA it does not send)"
        )
    else:
        check = f"if {host} uses a private CA, name a PEM bundle holding it in github.ca_file"
    if problem.startswith("Hostname mismatch") or "doesn't match" in problem:
        check = f"check that github.url names the host its certificate was issued for ({host})"
    if proxy is not None:
        check += (
            f"; if the proxy {proxy.url} inspects TLS, the certificate is the proxy's, and its "
            "CA belongs in github.ca_file"
        )
    return f"{host}'s certificate is not trusted ({problem}); trusted: {trusted}; {check}"
