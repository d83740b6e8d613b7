"""App JWTs, installation tokens shared by concurrent callers, and the admin chain."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from rungar.errors import ConfigError
from rungar.github.auth import (
    AdminChain,
    AppAuth,
    AppTokenSource,
    PatAuth,
    app_jwt,
    check_auth,
    token_source,
)
from rungar.github.transport import Transport
from rungar.github.urls import parse_config_url
from rungar.testing.clock import JumpingClock

NOW = 1_800_000_000.0
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
PEM = KEY.private_bytes(
    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
).decode()


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_the_app_jwt_is_rs256_backdated_a_minute_and_lives_nine() -> None:
    token = app_jwt(AppAuth("Iv1.abc", 42, PEM), NOW)
    assert jwt.get_unverified_header(token)["alg"] == "RS256"
    claims = jwt.decode(
        token,
        KEY.public_key(),
        algorithms=["RS256"],
        options={"verify_exp": False, "verify_iat": False},
    )
    assert claims == {"iat": int(NOW - 60), "exp": int(NOW - 60) + 540, "iss": "Iv1.abc"}


def test_an_app_with_an_enterprise_url_is_refused_at_load() -> None:
    with pytest.raises(ConfigError, match="cannot register"):
        check_auth(AppAuth("1", 1, PEM), parse_config_url("https://github.com/enterprises/acme"))
    check_auth(PatAuth("ghp_x"), parse_config_url("https://github.com/enterprises/acme"))


def test_an_app_with_a_broken_key_is_refused_at_load() -> None:
    with pytest.raises(ConfigError, match="private key"):
        check_auth(AppAuth("1", 1, "not a key"), parse_config_url("https://github.com/octo"))


def _transport(handler: object, clock: JumpingClock) -> Transport:
    # why the ignore[arg-type] below: handler is a MockTransport handler
    return Transport(httpx.AsyncClient(transport=httpx.MockTransport(handler)), clock)  # type: ignore[arg-type]


async def test_concurrent_callers_share_one_installation_token_mint() -> None:
    clock = JumpingClock(NOW)
    mints = 0

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal mints
        mints += 1
        for _ in range(10):  # let the other callers pile up behind the first
            await asyncio.sleep(0)
        return httpx.Response(
            201, json={"token": f"ghs_{mints}", "expires_at": _iso(clock.now() + 3600)}
        )

    source = AppTokenSource(
        AppAuth("1", 7, PEM),
        parse_config_url("https://github.com/octo"),
        _transport(handler, clock),
        clock,
    )
    tokens = await asyncio.gather(*(source.token() for _ in range(20)))
    assert set(tokens) == {"ghs_1"} and mints == 1


async def test_the_installation_token_is_renewed_when_under_five_minutes_remain() -> None:
    clock = JumpingClock(NOW)
    count = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal count
        count += 1
        assert request.url.path == "/app/installations/7/access_tokens"
        return httpx.Response(
            201, json={"token": f"ghs_{count}", "expires_at": _iso(clock.now() + 3600)}
        )

    source = AppTokenSource(
        AppAuth("1", 7, PEM),
        parse_config_url("https://github.com/octo"),
        _transport(handler, clock),
        clock,
    )
    assert await source.token() == "ghs_1"
    clock.t += 3600 - 301
    assert await source.token() == "ghs_1"
    clock.t += 2
    assert await source.token() == "ghs_2"


async def test_the_admin_chain_is_rerun_before_the_admin_token_expires() -> None:
    clock = JumpingClock(NOW)
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        if request.url.path.endswith("registration-token"):
            return httpx.Response(
                201, json={"token": "REG", "expires_at": _iso(clock.now() + 3600)}
            )
        assert request.headers["authorization"] == "RemoteAuth REG"
        assert json.loads(request.content) == {
            "url": "https://github.com/octo",
            "runner_event": "register",
        }
        admin = jwt.encode({"exp": int(clock.now() + 600)}, "k" * 32, algorithm="HS256")
        return httpx.Response(200, json={"url": "https://pipelines.example/tenant", "token": admin})

    target = parse_config_url("https://github.com/octo")
    transport = _transport(handler, clock)
    chain = AdminChain(
        target, token_source(PatAuth("ghp_x"), target, transport, clock), transport, clock
    )
    first = await chain.get()
    assert first.url == "https://pipelines.example/tenant/"
    clock.t += 600 - 121
    assert await chain.get() is first
    clock.t += 2
    assert await chain.get() is not first
    assert calls.count("/actions/runner-registration") == 2
    assert calls.count("/orgs/octo/actions/runners/registration-token") == 1  # still valid: cached
