"""The daemon's webhook socket is taken before anything starts, and a wake is never lost."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rungar.daemon.daemon import Daemon
from rungar.daemon.runloop import RunLoop
from rungar.daemon.settings import DaemonSettings
from rungar.errors import ConfigError
from tests.waiting import WAIT


def _settings(tmp_path: Path, listen: str, secret_path: str) -> DaemonSettings:
    return DaemonSettings.model_validate(
        {
            "github": {"url": "http://127.0.0.1:1/acme", "token_path": str(tmp_path / "t")},
            "scale_sets": str(tmp_path / "scale_sets.yaml"),
            "webhook": {"listen": listen, "secret_path": secret_path},
        }
    )


def test_a_webhook_port_in_use_is_refused_naming_the_key(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s3cret")
    secret.chmod(0o600)
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        daemon = Daemon(_settings(tmp_path, f"127.0.0.1:{port}", str(secret)))
        with pytest.raises(ConfigError) as refused:
            daemon._bind_webhook()
    assert refused.value.problems[0].startswith(
        f"webhook.listen: cannot listen on 127.0.0.1:{port}"
    )


def test_a_missing_webhook_secret_is_refused_naming_the_key(tmp_path: Path) -> None:
    daemon = Daemon(_settings(tmp_path, "127.0.0.1:0", str(tmp_path / "absent")))
    with pytest.raises(ConfigError) as refused:
        daemon._bind_webhook()
    assert refused.value.problems[0].startswith("webhook.secret_path: cannot read")


def test_the_webhook_socket_is_bound_with_its_secret(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s3cret\n")
    secret.chmod(0o600)
    bound = Daemon(_settings(tmp_path, "127.0.0.1:0", str(secret)))._bind_webhook()
    assert bound is not None
    sock, text = bound
    with sock:
        assert text == "s3cret" and sock.getsockname()[1] > 0


async def test_a_wake_during_a_reconcile_pass_runs_another_pass() -> None:
    passes: list[int] = []
    third = asyncio.Event()

    async def reconcile() -> None:
        passes.append(len(passes))
        if len(passes) == 1:
            loop.wake()  # as a webhook or `rungar reconcile` would, mid-pass
        if len(passes) == 3:
            third.set()

    slept = asyncio.Event()

    async def sleep_long(seconds: float) -> None:
        slept.set()
        await asyncio.sleep(3600)

    ctx: Any = SimpleNamespace(
        sets={},
        clock=SimpleNamespace(sleep=sleep_long),
        config=SimpleNamespace(timing=SimpleNamespace(reconcile_interval=3600.0)),
        save_placement=lambda: None,
    )
    unused: Any = SimpleNamespace()
    reconciler: Any = SimpleNamespace(reconcile=reconcile)
    starting: Any = SimpleNamespace(forever=lambda: asyncio.Event().wait())  # not this test's
    loop = RunLoop(
        ctx,
        jobs=unused,
        scaler=unused,
        reconciler=reconciler,
        starting=starting,
    )
    await loop.start()
    try:
        await asyncio.wait_for(slept.wait(), WAIT)  # waits on the event, not on the wall clock
        assert passes == [0, 1]  # the wake during the first pass ran a second, then it slept
        loop.wake()
        await asyncio.wait_for(third.wait(), WAIT)
    finally:
        await loop.stop()
