"""The fleet page's listener over real loopback sockets: who may look, how many may watch live,
HTTPS, and a flood of connections that must not keep the engine's loop from its work.

The engine here is scripted (tests/integration/fleet_script.py) and its loop is this test's
own: the page's sampler asks it through ``engine_caller`` exactly as in the daemon, so a flood
that slowed the engine's loop would show as a call on it missing its deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import trustme

from rungar.config.model import DashboardConfig
from rungar.errors import ConfigError
from rungar.web.bounded import BoundedHttpServer, Limits, bind, engine_caller
from rungar.web.fleet.app import FleetApp
from rungar.web.fleet.feed import Feed
from rungar.web.fleet.serve import dashboard_url, prepare_dashboard, tls_context
from tests.integration.fleet_script import ScriptedEngine
from tests.waiting import WAIT

ANSWER_WITHIN = 1.0  # seconds: a deadline on each call, not a measurement
TOKEN = "dashboard-secret-token"


def usage(by: str, since: float) -> dict[str, Any]:
    return {"by": by, "since": since, "groups": [], "total": {"jobs": 0}}


async def served(
    *,
    token: str = "",
    tls: ssl.SSLContext | None = None,
    max_streams: int = 16,
    limits: Limits | None = None,
) -> tuple[BoundedHttpServer, ScriptedEngine]:
    engine = ScriptedEngine()
    # The sampler asks this test's loop, as it asks the engine's in the daemon.
    feed = Feed(
        engine.read,
        engine_caller(asyncio.get_running_loop()),
        refresh=0.05,
        max_streams=max_streams,
    )
    app = FleetApp(feed, usage, token=token, secure=tls is not None, now=lambda: 5000.0)
    server = BoundedHttpServer(
        app, bind("127.0.0.1:0", key="test"), limits, tls=tls, background=feed.run
    )
    server.start()
    return server, engine


@contextlib.asynccontextmanager
async def serving(**options: Any) -> AsyncIterator[tuple[str, ScriptedEngine]]:
    server, engine = await served(**options)
    try:
        yield f"http://{server.address}", engine
    finally:
        await asyncio.to_thread(server.stop)


async def test_the_page_its_status_and_usage_answer_on_loopback_without_a_token() -> None:
    async with serving() as (url, _), httpx.AsyncClient(base_url=url, timeout=WAIT) as client:
        page = await client.get("/")
        assert page.status_code == 200 and "Rungar" in page.text
        assert page.headers["x-frame-options"] == "DENY"
        answer = await client.get("/api/status")
        assert answer.json()["providers"][0]["status"].startswith("HELD")
        assert (await client.get("/api/usage?by=provider&since=1h")).json()["since"] == 1400.0
        assert (await client.get("/api/usage?by=colour")).status_code == 400
        assert (await client.get("/static/uplot/uPlot.iife.min.js")).status_code == 200
        assert (await client.post("/")).status_code == 405


async def test_a_request_without_the_token_is_refused_and_one_in_the_address_sets_a_cookie() -> (
    None
):
    async with serving(token=TOKEN) as (url, _), httpx.AsyncClient(base_url=url, timeout=WAIT) as c:
        assert (await c.get("/api/status")).status_code == 401
        assert (
            await c.get("/api/status", headers={"authorization": "Bearer nope"})
        ).status_code == 401
        bearer = await c.get("/api/status", headers={"authorization": f"Bearer {TOKEN}"})
        assert bearer.status_code == 200
        opened = await c.get(f"/?token={TOKEN}")
        assert opened.status_code == 200
        assert "HttpOnly" in opened.headers["set-cookie"]
        assert (await c.get("/api/status")).status_code == 200  # the cookie carries it now


async def test_live_views_past_max_streams_are_refused_and_the_open_ones_get_updates() -> None:
    async with (
        serving(max_streams=2) as (url, engine),
        httpx.AsyncClient(base_url=url, timeout=WAIT) as client,
        client.stream("GET", "/api/stream") as one,
        client.stream("GET", "/api/stream") as two,
    ):
        assert one.status_code == two.status_code == 200
        async with client.stream("GET", "/api/stream") as third:
            assert third.status_code == 503
        lines = one.aiter_lines()
        assert await anext(lines) == "event: snapshot"
        engine.events.append(
            {
                "time": 1001.0,
                "kind": "runner",
                "name": "linux-1",
                "action": "created",
                "scale_set": "linux",
                "provider": "host",
                "message": "",
                "attributes": {},
            }
        )
        seen = ""
        async for line in lines:
            if '"linux-1"' in line and line.startswith("data:"):
                seen = line
                break
        assert '"action": "created"' in seen


async def test_over_tls_with_client_certificates_only_a_client_the_ca_signed_is_served(
    tmp_path: Path,
) -> None:
    ca = trustme.CA()
    server_cert = ca.issue_cert("127.0.0.1")
    server_cert.private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "server.pem"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    config = DashboardConfig(
        listen="10.0.0.1:8180",
        cert_file=str(tmp_path / "server.pem"),
        key_file=str(tmp_path / "server.pem"),
        client_ca_file=str(tmp_path / "ca.pem"),
    )
    context = tls_context(config)
    server, _ = await served(tls=context)
    try:
        url = dashboard_url(config, server.address)
        assert url.startswith("https://127.0.0.1:")
        client_cert = ca.issue_cert("viewer")
        good = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
        client_cert.configure_cert(good)
        async with httpx.AsyncClient(verify=good, timeout=WAIT) as client:
            assert (await client.get(url + "api/status")).status_code == 200
        anonymous = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
        async with httpx.AsyncClient(verify=anonymous, timeout=WAIT) as client:
            with pytest.raises(httpx.HTTPError):
                await client.get(url + "api/status")
    finally:
        await asyncio.to_thread(server.stop)


def hold(port: int, count: int) -> list[socket.socket]:
    held = []
    for _ in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.connect_ex(("127.0.0.1", port))
        held.append(sock)
    return held


async def on_loop_within(deadline: float, call: Callable[[], None]) -> None:
    """Run ``call`` on this (the engine's) loop from another thread, within ``deadline``."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[bool] = loop.create_future()

    def on_loop() -> None:
        call()
        done.set_result(True)

    await asyncio.to_thread(loop.call_soon_threadsafe, on_loop)
    await asyncio.wait_for(done, deadline)


async def test_a_flood_of_idle_connections_and_live_views_leaves_engine_and_page_answering() -> (
    None
):
    limits = Limits(max_connections=64)
    async with serving(max_streams=4, limits=limits) as (url, _):
        port = int(url.rsplit(":", 1)[1])
        held = await asyncio.to_thread(hold, port, 400)
        streams: list[Any] = []
        try:
            async with httpx.AsyncClient(base_url=url, timeout=ANSWER_WITHIN) as client:
                for _ in range(4):  # every live view the page allows, held open
                    streams.append(
                        await client.send(client.build_request("GET", "/api/stream"), stream=True)
                    )
                for _ in range(3):  # more than once: not a lucky first slot
                    await on_loop_within(ANSWER_WITHIN, lambda: None)
                    page = await client.get("/")
                    assert page.status_code == 200
                    async with client.stream("GET", "/api/stream") as refused:
                        assert refused.status_code == 503
                    status = await client.get("/api/status")
                    assert status.json()["scale_sets"][0]["name"] == "linux"
        finally:
            for stream in streams:
                await stream.aclose()
            for sock in held:
                sock.close()


def test_a_certificate_or_token_that_cannot_be_read_stops_the_start_naming_its_key(
    tmp_path: Path,
) -> None:
    missing = DashboardConfig(
        listen="127.0.0.1:0",
        cert_file=str(tmp_path / "absent.pem"),
        key_file=str(tmp_path / "absent.pem"),
        token_file=str(tmp_path / "token"),
    )
    with pytest.raises(ConfigError, match=r"^dashboard.tls.cert_file: cannot load .*absent.pem"):
        prepare_dashboard(missing)
    (tmp_path / "token").write_text("\n")
    empty = DashboardConfig(listen="127.0.0.1:0", token_file=str(tmp_path / "token"))
    with pytest.raises(ConfigError, match=r"^dashboard.token_file: .* is empty"):
        prepare_dashboard(empty)
    (tmp_path / "token").write_text(TOKEN + "\n")
    prepared = prepare_dashboard(empty)
    assert prepared is not None and prepared.token == TOKEN and prepared.tls is None
    prepared.sock.close()
    assert prepare_dashboard(DashboardConfig()) is None  # no listen: no fleet page
