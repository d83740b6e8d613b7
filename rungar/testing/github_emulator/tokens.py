"""Credentials the emulator accepts and issues (docs/github-emulator.md).

PATs and App public keys are configured; registration tokens are random strings with an expiry;
installation tokens come in GitHub's two shapes: the stateless one it issues since 2026 by
default (``ghs_<app id>_<JWT>``, about 520 characters of base64url with two dots) or the short
opaque one (``ghs_`` and 36 letters and digits), chosen by ``stateless_installation_tokens`` and,
per request, by GitHub's ``X-GitHub-Stateless-S2S-Token`` header (``enabled``/``disabled``). The
admin and message-queue tokens are HS256 JWTs with a real ``exp``, so a client can read it (as
ARC, GARM and GitHub's scale-set client do) and the emulator can refuse it once expired.

Every secret the emulator hands out (tokens of each kind, JIT configs and the runner credentials
inside them) is kept in ``issued``, so a test can search a client's logs and files for any piece
of one (docs/github-emulator.md, "Tokens").

Every token time is wall-clock time, issued and checked: a client renews its tokens by its own
clock, so tokens must not age faster when the emulated clock is compressed, nor expire
when it jumps (docs/github-emulator.md, "Wall-clock and emulated times").
"""

from __future__ import annotations

import secrets
import string
from collections import deque
from dataclasses import dataclass
from typing import Any

import jwt

from rungar.testing.github_emulator.clock import EmulatorClock

# GitHub's per-request override of the installation token's shape (``enabled``: stateless,
# ``disabled``: stateful; any other value is ignored, as GitHub does).
STATELESS_S2S_HEADER = "X-GitHub-Stateless-S2S-Token"
_OPAQUE = string.ascii_letters + string.digits
ISSUED_KEPT = 100_000


@dataclass(slots=True)
class Issued:
    owner: str
    expires_at: float
    scope_url: str = ""
    # The App installation the credential comes from, and the App (0 and "": a PAT's).
    installation: int = 0
    app: str = ""


class TokenAuthority:
    def __init__(
        self,
        clock: EmulatorClock,
        apps: dict[str, str],
        installations: dict[int, str],
        stateless_installation_tokens: bool = True,
    ) -> None:
        self._clock = clock
        self.stateless_installation_tokens = stateless_installation_tokens
        # Every secret handed out, for leak searches: the newest ISSUED_KEPT, so a long-running
        # emulator (the demo's) does not grow without bound.
        self.issued: deque[str] = deque(maxlen=ISSUED_KEPT)
        self._key = secrets.token_bytes(32)
        self._installation_key = secrets.token_bytes(64)  # HS512's
        self.apps = apps  # app id or client id -> RSA public key (PEM)
        self.installations = installations  # installation id -> owner
        self.pats: dict[str, str] = {}  # token -> owner
        self.installation_tokens: dict[str, Issued] = {}
        self.registration_tokens: dict[str, Issued] = {}
        self.revoked: set[str] = set()
        # Service JWTs already decoded: a client sends the same one with every call, and
        # decoding one costs more than the rest of a registration. Its signature is checked
        # when first seen; expiry and revocation at every call.
        self._verified: dict[str, dict[str, Any]] = {}
        self._sessions: dict[str, str] = {}
        self._callers: dict[str, str] = {}
        # Faults: Apps revoked (their JWTs, and every token minted through them, refused: 401)
        # and installations suspended (their tokens 403 at minting, refused after).
        self.revoked_apps: set[str] = set()
        self.suspended: set[int] = set()

    # ---- REST credentials ---------------------------------------------------------------

    def check_app_jwt(self, token: str) -> str | None:
        """The App's id when ``token`` is a valid App JWT (RS256, ≤ 10 min, not expired)."""
        try:
            unverified = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            return None
        app_id = str(unverified.get("iss", ""))
        key = self.apps.get(app_id)
        if key is None or app_id in self.revoked_apps:
            return None
        try:
            claims = jwt.decode(
                token, key, algorithms=["RS256"], options={"verify_exp": False, "verify_iat": False}
            )
        except jwt.PyJWTError:
            return None
        iat, exp = claims.get("iat"), claims.get("exp")
        if not isinstance(iat, int) or not isinstance(exp, int) or exp - iat > 600 or exp <= iat:
            return None
        # App JWTs are written in the client's wall time, not the emulated time.
        wall = self._clock.wall()
        if exp < wall or iat > wall + 60:
            return None
        return app_id

    def issue_installation_token(
        self, installation_id: int, ttl: float, app_id: str = "", override: str = ""
    ) -> tuple[str, float]:
        """A token for ``installation_id``, in the configured shape unless ``override`` (the
        ``X-GitHub-Stateless-S2S-Token`` header's value) asks for the other."""
        expires = self._clock.wall() + ttl
        stateless = {"enabled": True, "disabled": False}.get(
            override, self.stateless_installation_tokens
        )
        if stateless:
            token = self._stateless_token(installation_id, app_id, expires)
        else:
            token = "ghs_" + "".join(secrets.choice(_OPAQUE) for _ in range(36))
        self.installation_tokens[token] = Issued(
            self.installations[installation_id],
            expires,
            installation=installation_id,
            app=app_id,
        )
        self.remember(token)
        return token, expires

    def _stateless_token(self, installation_id: int, app_id: str, expires: float) -> str:
        """``ghs_<app id>_<JWT>``: GitHub's stateless shape, its claims naming the installation
        and the app, signed, so every part is base64url (``-`` and ``_`` included)."""
        numeric = app_id if app_id.isdigit() else str(1000 + len(self.apps))
        claims = {
            "iss": "https://api.github.com",
            "sub": f"installation:{installation_id}",
            "aud": "github-app-installation",
            "app_id": int(numeric),
            "installation_id": installation_id,
            "repository_selection": "all",
            "permissions": {
                "administration": "write",
                "organization_self_hosted_runners": "write",
                "metadata": "read",
            },
            "iat": int(self._clock.wall()),
            "exp": int(expires),
            "jti": secrets.token_urlsafe(24),
        }
        return f"ghs_{numeric}_" + jwt.encode(claims, self._installation_key, algorithm="HS512")

    def remember(self, secret: str) -> None:
        """Keep ``secret`` among those handed out (a JIT config, a runner credential)."""
        self.issued.append(secret)

    def cut_off(self, app: str, installation: int) -> bool:
        """Whether a credential minted through ``app`` for ``installation`` is refused now: the
        App revoked or the installation suspended (a fault)."""
        return (bool(app) and app in self.revoked_apps) or installation in self.suspended

    def rest_issued(self, token: str) -> Issued | None:
        """The REST credential (PAT or installation token) ``token`` is, or None."""
        if token in self.revoked:
            return None
        if token in self.pats:
            return Issued(self.pats[token], float("inf"))
        issued = self.installation_tokens.get(token)
        if (
            issued is not None
            and issued.expires_at > self._clock.wall()
            and not self.cut_off(issued.app, issued.installation)
        ):
            return issued
        return None

    def rest_owner(self, token: str) -> str | None:
        """Whose REST credential this is (PAT or installation token), or None."""
        issued = self.rest_issued(token)
        return issued.owner if issued is not None else None

    def issue_registration_token(
        self, owner: str, scope_url: str, ttl: float, by: Issued | None = None
    ) -> tuple[str, float]:
        """A registration token, minted with the REST credential ``by`` (its installation and
        App are the token's, and the admin token's it is traded for)."""
        token = "AABB" + secrets.token_hex(14).upper()
        expires = self._clock.wall() + ttl
        self.registration_tokens[token] = Issued(
            owner,
            expires,
            scope_url,
            installation=by.installation if by else 0,
            app=by.app if by else "",
        )
        self.remember(token)
        return token, expires

    def check_registration_token(self, token: str) -> Issued | None:
        issued = self.registration_tokens.get(token)
        if issued is None or issued.expires_at <= self._clock.wall() or token in self.revoked:
            return None
        if self.cut_off(issued.app, issued.installation):
            return None
        return issued

    def caller_of(self, token: str) -> str:
        """Whose registration limit a call with ``token`` counts against: its App installation
        (``installation:N``, from an installation token or an admin token minted through one),
        or "" (a PAT's, or no credential)."""
        issued = self.installation_tokens.get(token)
        if issued is not None:
            return f"installation:{issued.installation}"
        caller = self._callers.get(token)
        if caller is None:
            claims = self._verified.get(token)
            if claims is None:
                try:
                    claims = jwt.decode(token, options={"verify_signature": False})
                except jwt.PyJWTError:
                    claims = {}
            inst = claims.get("inst", 0) if isinstance(claims, dict) else 0
            caller = f"installation:{inst}" if inst else ""
            _keep(self._callers, token, caller)
        return caller

    # ---- service JWTs ---------------------------------------------------------------------

    def issue_jwt(self, claims: dict[str, Any], ttl: float) -> str:
        """A service JWT valid for ``ttl`` real seconds from now (wall clock)."""
        now = self._clock.wall()
        body = {**claims, "iat": int(now), "exp": int(now + ttl), "jti": secrets.token_hex(6)}
        token = jwt.encode(body, self._key, algorithm="HS256")
        self.remember(token)
        return token

    def check_jwt(self, token: str, kind: str) -> dict[str, Any] | None:
        if token in self.revoked:
            return None
        claims = self._verified.get(token)
        if claims is None:
            try:
                claims = jwt.decode(
                    token,
                    self._key,
                    algorithms=["HS256"],
                    options={"verify_exp": False, "verify_iat": False},
                )
            except jwt.PyJWTError:
                return None
            _keep(self._verified, token, claims)
        if claims.get("kind") != kind or float(claims.get("exp", 0)) <= self._clock.wall():
            return None
        if self.cut_off(str(claims.get("app", "")), int(claims.get("inst", 0) or 0)):
            return None
        return dict(claims)

    def session_of(self, token: str) -> str:
        """The message session a token names (its ``sid``), checked or not: for the request
        log, which records who called even with an expired or revoked token."""
        sid = self._sessions.get(token)
        if sid is not None:
            return sid
        try:
            claims = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            return ""
        sid = str(claims.get("sid", "")) if isinstance(claims, dict) else ""
        _keep(self._sessions, token, sid)
        return sid

    def revoke(self, token: str) -> None:
        self.revoked.add(token)


KEPT_TOKENS = 1024  # decoded tokens kept, at most; the oldest go first


def _keep(kept: dict[str, Any], token: str, value: Any) -> None:
    if len(kept) >= KEPT_TOKENS:
        del kept[next(iter(kept))]
    kept[token] = value
