"""Credentials the emulator accepts and issues (docs/github-emulator.md).

PATs and App public keys are configured; installation and registration tokens are random strings
with an expiry; the admin and message-queue tokens are HS256 JWTs with a real ``exp``, so a
client can read it (as ARC, GARM and GitHub's scale-set client do) and the emulator can refuse it
once expired. Every token time is wall-clock time, issued and checked: a client renews its tokens
by its own clock, so tokens must not age faster when the emulated clock is compressed, nor expire
when it jumps (docs/github-emulator.md, "Wall-clock and emulated times").
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

import jwt

from rungar.testing.github_emulator.clock import EmulatorClock


@dataclass(slots=True)
class Issued:
    owner: str
    expires_at: float
    scope_url: str = ""


class TokenAuthority:
    def __init__(
        self, clock: EmulatorClock, apps: dict[str, str], installations: dict[int, str]
    ) -> None:
        self._clock = clock
        self._key = secrets.token_bytes(32)
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

    # ---- REST credentials ---------------------------------------------------------------

    def check_app_jwt(self, token: str) -> str | None:
        """The App's id when ``token`` is a valid App JWT (RS256, ≤ 10 min, not expired)."""
        try:
            unverified = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            return None
        app_id = str(unverified.get("iss", ""))
        key = self.apps.get(app_id)
        if key is None:
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

    def issue_installation_token(self, installation_id: int, ttl: float) -> tuple[str, float]:
        token = "ghs_" + secrets.token_hex(16)
        expires = self._clock.wall() + ttl
        self.installation_tokens[token] = Issued(self.installations[installation_id], expires)
        return token, expires

    def rest_owner(self, token: str) -> str | None:
        """Whose REST credential this is (PAT or installation token), or None."""
        if token in self.revoked:
            return None
        if token in self.pats:
            return self.pats[token]
        issued = self.installation_tokens.get(token)
        if issued is not None and issued.expires_at > self._clock.wall():
            return issued.owner
        return None

    def issue_registration_token(self, owner: str, scope_url: str, ttl: float) -> tuple[str, float]:
        token = "AABB" + secrets.token_hex(14).upper()
        expires = self._clock.wall() + ttl
        self.registration_tokens[token] = Issued(owner, expires, scope_url)
        return token, expires

    def check_registration_token(self, token: str) -> Issued | None:
        issued = self.registration_tokens.get(token)
        if issued is None or issued.expires_at <= self._clock.wall() or token in self.revoked:
            return None
        return issued

    # ---- service JWTs ---------------------------------------------------------------------

    def issue_jwt(self, claims: dict[str, Any], ttl: float) -> str:
        """A service JWT valid for ``ttl`` real seconds from now (wall clock)."""
        now = self._clock.wall()
        body = {**claims, "iat": int(now), "exp": int(now + ttl), "jti": secrets.token_hex(6)}
        return jwt.encode(body, self._key, algorithm="HS256")

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
