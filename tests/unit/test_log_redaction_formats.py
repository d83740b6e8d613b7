"""Every GitHub credential format, in free text, leaves no 8-character piece in a log line.

The tokens are made the way the GitHub emulator makes them (the stateless ``ghs_<app id>_<JWT>``
installation tokens GitHub issues since 2026, the older opaque ones, the scale set's JWTs, JIT
configs) or as GitHub documents them (classic and fine-grained PATs), 200 of each (40 App JWTs,
whose RSA signatures are slow to make), since a pattern that stops at a character only some
tokens hold lets most of those through.
"""

from __future__ import annotations

import secrets
import string
from collections.abc import Callable
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from rungar import logs
from rungar.testing.github_emulator.clock import EmulatorClock
from rungar.testing.github_emulator.rest import encode_jit
from rungar.testing.github_emulator.tokens import TokenAuthority

TRIES = 200
SLOW_TRIES = 40  # an RS256 signature costs 30 ms
PIECE = 8
_ALNUM = string.ascii_letters + string.digits
_APP_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
_APP_PEM = _APP_KEY.private_bytes(
    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
).decode()


def authority(stateless: bool = True) -> TokenAuthority:
    return TokenAuthority(EmulatorClock(), {"123456": ""}, {1: "octo-org"}, stateless)


def stateless_installation_token() -> str:
    return authority().issue_installation_token(1, 3600, "123456")[0]


def opaque_installation_token() -> str:
    return authority(stateless=False).issue_installation_token(1, 3600, "123456")[0]


def classic_pat() -> str:
    return "ghp_" + "".join(secrets.choice(_ALNUM) for _ in range(36))


def fine_grained_pat() -> str:
    body = "".join(secrets.choice(_ALNUM) for _ in range(22))
    return f"github_pat_11{body}_" + "".join(secrets.choice(_ALNUM) for _ in range(59))


def scale_set_token() -> str:
    return authority().issue_jwt({"kind": "admin", "owner": "octo-org"}, 3600)


def app_jwt() -> str:
    now = 1_700_000_000
    claims = {"iat": now, "exp": now + 600, "iss": "Iv1." + secrets.token_hex(8)}
    return jwt.encode(claims, _APP_PEM, algorithm="RS256")


def jit_config() -> str:
    credential = "rc_" + secrets.token_hex(16)
    return encode_jit(authority(), "https://ghes.example", 7, "r-1", credential, "")


FORMATS: dict[str, Callable[[], str]] = {
    "stateless installation token": stateless_installation_token,
    "opaque installation token": opaque_installation_token,
    "classic PAT": classic_pat,
    "fine-grained PAT": fine_grained_pat,
    "scale set admin JWT": scale_set_token,
    "App JWT": app_jwt,
    "JIT config": jit_config,
}
# Where a library puts a credential in its own words.
SENTENCES = [
    "auth failed for token {}",
    "Authorization: token {}",
    "Authorization: Bearer {}",
    "{'authorization': 'Bearer {}'}",
    "GET https://api.github.com/x?access_token={}&page=2 failed",
    '"{}"',
    "{}.",
]


def pieces(secret: str) -> set[str]:
    return {secret[i : i + PIECE] for i in range(len(secret) - PIECE + 1)}


def redacted(text: str) -> str:
    event: dict[str, Any] = {"event": text}
    return str(logs.redact_text(None, "", event)["event"])


@pytest.mark.parametrize("name", FORMATS)
def test_no_piece_of_a_credential_survives_redaction_in_free_text(name: str) -> None:
    for n in range(SLOW_TRIES if name == "App JWT" else TRIES):
        secret = FORMATS[name]()
        sentence = SENTENCES[n % len(SENTENCES)].replace("{}", secret)
        out = redacted(sentence)
        found = sorted(p for p in pieces(secret) if p in out)
        assert not found, f"{name}: {found[:3]} survived in {out[:200]!r}"


def test_the_stateless_installation_token_has_githubs_shape() -> None:
    token = stateless_installation_token()
    prefix, app_id, rest = token.split("_", 2)
    assert (prefix, app_id) == ("ghs", "123456")
    assert rest.count(".") == 2 and 400 <= len(token) <= 700  # GitHub: about 520 characters
    assert set(rest) <= set(_ALNUM + "-_.")


@pytest.mark.parametrize(
    "text",
    [
        "runner rungar-linux-0a1b2c3d created on host1 in 2.1s",
        "/var/lib/rungar/state/events.jsonl: 10000 events kept",
        "installation token renewed, expires in 3600 s",
        "scale set 'gpu-large' (id 42) listening, session 8f14e45f-ceea-467f-a0e6-7d3d9b1c2a11",
        "GET https://ghes.example.com/api/v3/orgs/octo/actions/runner-groups 200",
    ],
)
def test_ordinary_lines_are_left_as_they_are(text: str) -> None:
    assert redacted(text) == text


@pytest.mark.parametrize(
    ("stateless", "header", "shape"),
    [
        (True, "", "stateless"),
        (False, "", "opaque"),
        (False, "enabled", "stateless"),
        (True, "disabled", "opaque"),
        (False, "true", "opaque"),  # GitHub ignores any other value
    ],
)
def test_the_emulator_honours_githubs_per_request_token_shape_header(
    stateless: bool, header: str, shape: str
) -> None:
    token = authority(stateless).issue_installation_token(1, 3600, "123456", header)[0]
    got = "stateless" if token.count(".") == 2 else "opaque"
    assert got == shape
    if shape == "opaque":
        assert len(token) == 40 and set(token[4:]) <= set(_ALNUM)
