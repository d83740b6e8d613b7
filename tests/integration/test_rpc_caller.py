"""Provider calls say who is calling: each carries the installation, the daemon's host and its
start time as metadata (provider.proto), which the server kit logs on its ``provider.call`` line
and hands the provider as ``current_caller()``, so a provider tells two daemons apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import structlog
from structlog.testing import capture_logs

from rungar.clock import SystemClock
from rungar.config.model import ProviderConfig
from rungar.daemon.providers import make_provider
from rungar.model.caller import Caller, current_caller
from rungar.model.machine import Machine
from rungar.rpc.client import GrpcProvider
from rungar.rpc.server import serve
from rungar.testing.fake_provider import FakeProvider

DAEMON_A = Caller("gh-0123abcd", "ci-1", 1_790_000_000.25)
DAEMON_B = Caller("gh-0123abcd", "ci-2", 1_790_000_500.5)


class CallerRecordingProvider(FakeProvider):
    """Remembers who called each List, and logs a line of its own during the call."""

    def __init__(self) -> None:
        super().__init__("host1")
        self.callers: list[Caller | None] = []

    async def list(self, selector: Mapping[str, str]) -> list[Machine]:
        self.callers.append(current_caller())
        structlog.get_logger("provider").info("provider.own_line")
        return await super().list(selector)


async def test_each_call_names_the_daemon_that_made_it_and_the_provider_tells_two_apart(
    short_dir: Path,
) -> None:
    provider = CallerRecordingProvider()
    address = f"unix://{short_dir}/p.sock"
    async with await serve(provider, address):
        # The daemon's own wiring: make_provider hands its caller to the gRPC client.
        config = ProviderConfig("host1", "runnerd", address=address)
        first = make_provider(config, SystemClock(), plugins=[], caller=DAEMON_A)
        second = GrpcProvider("host1", address, caller=DAEMON_B)
        assert isinstance(first, GrpcProvider)
        # As every entry point configures structlog: context variables are merged in.
        with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as logs:
            await first.list({})
            await second.list({})
        await first.close()
        await second.close()
    assert provider.callers == [DAEMON_A, DAEMON_B]
    calls = [line for line in logs if line["event"] == "provider.call"]
    assert [(c["installation"], c["daemon_host"], c["daemon_started_at"]) for c in calls] == [
        ("gh-0123abcd", "ci-1", 1_790_000_000.25),
        ("gh-0123abcd", "ci-2", 1_790_000_500.5),
    ]
    own = [line["caller"] for line in logs if line["event"] == "provider.own_line"]
    assert own == [DAEMON_A.describe(), DAEMON_B.describe()]
    assert own[0] == "gh-0123abcd on ci-1 (started 2026-09-21T14:13:20Z)"


async def test_a_call_that_names_no_caller_is_served_and_logged_without_one(
    short_dir: Path,
) -> None:
    provider = CallerRecordingProvider()
    address = f"unix://{short_dir}/p.sock"
    async with await serve(provider, address):
        client = GrpcProvider("host1", address)  # grpcurl, a probe, another tool
        with capture_logs() as logs:
            await client.list({})
        await client.close()
    assert provider.callers == [None]
    [call] = [line for line in logs if line["event"] == "provider.call"]
    assert "installation" not in call and call["result"] == "0 machines"
    assert current_caller() is None, "the caller does not leak out of the call"


def test_a_caller_round_trips_through_metadata_and_ignores_other_entries() -> None:
    entries = [("authorization", "Bearer x"), *DAEMON_A.metadata(), ("user-agent", "grpc")]
    assert Caller.from_metadata(entries) == DAEMON_A
    assert Caller.from_metadata([("user-agent", "grpc")]) is None
    garbled = Caller.from_metadata([("rungar-daemon-started-at", b"soon")])
    assert garbled == Caller("", "", 0.0)
