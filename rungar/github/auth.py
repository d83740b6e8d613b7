"""Credentials and the admin connection chain (docs/github.md).

Two credential modes end in the same place. A PAT is used as is. A GitHub App signs a JWT (RS256,
``iat`` backdated 60 s for clock skew, ``exp`` 9 minutes later) and trades it for an installation
token that lives an hour; Rungar mints a new one when less than 5 minutes remain. From either,
the chain registration token → ``runner-registration`` gives the Actions service's admin URL and
a JWT whose ``exp`` is read (without verifying it) so the chain is re-run before it runs out.
Concurrent callers share one mint: a lock serialises refreshes and the second caller finds the
fresh token. Apps cannot register enterprise runners, so that combination is refused at load.

A fresh registration token can be refused by ``runner-registration`` (401/403) for a little
while after it was minted (ARC #3377). Like the official clients, Rungar sends the *same* token
again, waits growing, for ``registration_retry_window`` (30 s) before minting a new one: a new
token would start that lag over. The new token gets one more window; then the refusal stands.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

import jwt
import structlog

from rungar.clock import Clock
from rungar.errors import ConfigError, GitHubError
from rungar.github.http import Response
from rungar.github.timing import GitHubTiming
from rungar.github.transport import Transport
from rungar.github.urls import GitHubTarget, Scope

log = structlog.get_logger("rungar.github")

JWT_BACKDATE = 60.0
JWT_LIFETIME = 9 * 60.0
REST_ACCEPT = "application/vnd.github+json"


@dataclass(frozen=True, slots=True)
class PatAuth:
    token: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class AppAuth:
    app_id: str  # the client ID or the numeric app ID; GitHub accepts both as ``iss``
    installation_id: int
    private_key_pem: str = field(repr=False)


Auth = PatAuth | AppAuth


def check_auth(auth: Auth, target: GitHubTarget) -> None:
    """Refuse at load what GitHub would refuse later: an App for an enterprise scope."""
    if isinstance(auth, AppAuth) and target.scope is Scope.ENTERPRISE:
        raise ConfigError(
            [
                f"github url {target.config_url!r}: a GitHub App cannot register "
                "enterprise runners; "
                "use a PAT with manage_runners:enterprise"
            ]
        )
    if isinstance(auth, AppAuth):
        try:
            jwt.encode({"iss": auth.app_id}, auth.private_key_pem, algorithm="RS256")
        except Exception as e:  # cryptography raises several unrelated types for bad PEMs
            raise ConfigError(
                [f"github app {auth.app_id}: private key is not a usable RSA PEM"]
            ) from e


def app_jwt(auth: AppAuth, now: float) -> str:
    """The App's JWT: RS256, iat backdated 60 s, exp = iat + 9 min (GitHub allows 10)."""
    iat = int(now - JWT_BACKDATE)
    claims = {"iat": iat, "exp": iat + int(JWT_LIFETIME), "iss": auth.app_id}
    return jwt.encode(claims, auth.private_key_pem, algorithm="RS256")


def parse_expiry(value: object) -> float:
    """``expires_at`` (RFC 3339) as epoch seconds; 0 when absent or unreadable."""
    if not isinstance(value, str) or not value:
        return 0.0
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def jwt_expiry(token: str) -> float:
    """A JWT's ``exp``, read without verifying it (clients cannot verify the service's key)."""
    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError:
        return 0.0
    exp = claims.get("exp")
    return float(exp) if isinstance(exp, int | float) else 0.0


class TokenSource(Protocol):
    """What REST calls authenticate with."""

    async def token(self) -> str: ...

    def invalidate(self) -> None: ...


class _CachedToken:
    """One secret with an expiry, minted by one caller while the others wait for it."""

    def __init__(
        self, clock: Clock, margin: float, mint: Callable[[], Awaitable[tuple[str, float]]]
    ) -> None:
        self._clock = clock
        self._margin = margin
        self._mint = mint
        self._value = ""
        self._expires_at = 0.0
        self._lock = asyncio.Lock()
        self.mints = 0

    def _fresh(self) -> bool:
        return bool(self._value) and self._clock.now() + self._margin < self._expires_at

    async def get(self) -> str:
        if self._fresh():
            return self._value
        async with self._lock:
            if not self._fresh():  # another caller may have minted while we waited
                self._value, self._expires_at = await self._mint()
                self.mints += 1
            return self._value

    def invalidate(self) -> None:
        self._value, self._expires_at = "", 0.0

    @property
    def expires_at(self) -> float:
        return self._expires_at


class PatTokenSource:
    def __init__(self, auth: PatAuth) -> None:
        self._token = auth.token

    async def token(self) -> str:
        return self._token

    def invalidate(self) -> None:
        """A PAT cannot be refreshed; a 401 with it is final."""


class AppTokenSource:
    """Installation tokens of a GitHub App, refreshed when under 5 minutes remain."""

    def __init__(
        self, auth: AppAuth, target: GitHubTarget, transport: Transport, clock: Clock
    ) -> None:
        self._auth = auth
        self._target = target
        self._transport = transport
        self._clock = clock
        margin = transport.timing.installation_token_refresh_margin
        self._cache = _CachedToken(clock, margin, self._mint)

    async def _mint(self) -> tuple[str, float]:
        url = (
            f"{self._target.rest_base}/app/installations/{self._auth.installation_id}/access_tokens"
        )
        headers = {
            "Authorization": f"Bearer {app_jwt(self._auth, self._clock.now())}",
            "Accept": REST_ACCEPT,
            "Content-Type": REST_ACCEPT,
        }
        response = await self._transport.request("POST", url, headers=headers, rest=True)
        body = _expect(response, (201,), "installation token")
        token = body.get("token")
        if not isinstance(token, str) or not token:
            raise GitHubError("installation token: answer carried no token", response.status)
        return token, parse_expiry(body.get("expires_at")) or self._clock.now() + 3600

    async def token(self) -> str:
        return await self._cache.get()

    def invalidate(self) -> None:
        self._cache.invalidate()

    @property
    def mints(self) -> int:
        return self._cache.mints


def token_source(
    auth: Auth, target: GitHubTarget, transport: Transport, clock: Clock
) -> TokenSource:
    check_auth(auth, target)
    if isinstance(auth, AppAuth):
        return AppTokenSource(auth, target, transport, clock)
    return PatTokenSource(auth)


@dataclass(frozen=True, slots=True)
class AdminConnection:
    url: str  # the Actions service base, always ending in "/"
    token: str = field(repr=False)
    expires_at: float = 0.0


class AdminChain:
    """registration token → runner-registration → (admin URL, admin JWT), each cached to expiry."""

    def __init__(
        self,
        target: GitHubTarget,
        tokens: TokenSource,
        transport: Transport,
        clock: Clock,
        timing: GitHubTiming | None = None,
    ) -> None:
        self._target = target
        self._tokens = tokens
        self._transport = transport
        self._clock = clock
        self._timing = timing or transport.timing
        self._registration = _CachedToken(
            clock, self._timing.registration_token_refresh_margin, self._mint_registration
        )
        self._connection: AdminConnection | None = None
        self._lock = asyncio.Lock()

    async def _mint_registration(self) -> tuple[str, float]:
        url = (
            f"{self._target.rest_base}/{self._target.scope_path}/actions/runners/registration-token"
        )
        for attempt in range(2):
            headers = {
                "Authorization": f"Bearer {await self._tokens.token()}",
                "Accept": REST_ACCEPT,
                "Content-Type": "application/vnd.github.v3+json",
            }
            response = await self._transport.request("POST", url, headers=headers, rest=True)
            if response.status == 401 and attempt == 0:
                self._tokens.invalidate()
                continue
            body = _expect(response, (201,), "registration token")
            token = body.get("token")
            if not isinstance(token, str) or not token:
                raise GitHubError("registration token: answer carried no token", response.status)
            return token, parse_expiry(body.get("expires_at")) or self._clock.now() + 3600
        raise AssertionError("unreachable: the second attempt returns or raises")

    def _fresh(self) -> bool:
        c = self._connection
        margin = self._timing.admin_token_refresh_margin
        return c is not None and self._clock.now() + margin < c.expires_at

    async def get(self) -> AdminConnection:
        if self._fresh():
            assert self._connection is not None
            return self._connection
        async with self._lock:
            if not self._fresh():
                self._connection = await self._connect()
            assert self._connection is not None
            return self._connection

    def invalidate(self) -> None:
        """The admin token was refused: the whole chain is re-run on next use."""
        self._connection = None
        self._registration.invalidate()

    async def _connect(self) -> AdminConnection:
        url = f"{self._target.rest_base}/actions/runner-registration"
        body = {"url": self._target.config_url, "runner_event": "register"}
        t = self._timing
        for window in range(2):  # the first token, then one freshly minted
            waited = 0.0  # summed, not read from the clock: the window is a budget of waits
            tries = 0
            while True:
                tries += 1
                headers = {
                    "Authorization": f"RemoteAuth {await self._registration.get()}",
                    "Content-Type": "application/json",
                }
                response = await self._transport.request(
                    "POST", url, headers=headers, json_body=body, rest=True
                )
                if response.status not in (401, 403):
                    return self._connection_from(response)
                wait = min(
                    t.registration_retry_first * 2 ** (tries - 1),
                    t.registration_retry_window - waited,
                )
                if wait <= 0:
                    break
                waited += wait
                log.info(
                    "github.registration_refused",
                    status=response.status,
                    retry_in_s=round(wait, 1),
                    note="the same registration token is sent again",
                )
                await self._clock.sleep(wait)
            if window == 0:
                self._registration.invalidate()  # refused all window long: mint a new one
        raise GitHubError(
            f"runner registration: HTTP {response.status}: {error_message(response)}",
            response.status,
        )

    def _connection_from(self, response: Response) -> AdminConnection:
        answer = _expect(response, None, "runner registration")
        admin_url, token = answer.get("url"), answer.get("token")
        if (
            not isinstance(admin_url, str)
            or not admin_url
            or not isinstance(token, str)
            or not token
        ):
            raise GitHubError("runner registration: answer lacks url or token", response.status)
        expires = jwt_expiry(token) or self._clock.now() + 3600
        return AdminConnection(
            admin_url if admin_url.endswith("/") else admin_url + "/", token, expires
        )


def _expect(response: Response, statuses: tuple[int, ...] | None, what: str) -> dict[str, object]:
    """The JSON object of a successful answer; a GitHubError naming ``what`` otherwise."""
    good = response.status in statuses if statuses else response.ok
    if not good:
        raise GitHubError(
            f"{what}: HTTP {response.status}: {error_message(response)}", response.status
        )
    try:
        body = response.json()
    except ValueError as e:
        raise GitHubError(f"{what}: answer is not JSON", response.status) from e
    if not isinstance(body, dict):
        raise GitHubError(f"{what}: answer is not a JSON object", response.status)
    return body


def error_message(response: Response) -> str:
    """The service's ``typeName: message`` (or plain text), short enough for a log line."""
    try:
        body = response.json()
    except ValueError:
        return response.body[:200].decode("utf-8", "replace")
    if isinstance(body, dict):
        parts = [str(body.get(k)) for k in ("typeName", "message") if body.get(k)]
        return ": ".join(parts)[:300]
    return ""
