"""runnerd's events: kept in the history, followed by a long poll, written by every sizing
change whoever makes it."""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

import httpx
import pytest
from runnerd.api import serve_api
from runnerd.config import parse_config
from runnerd.ctl import main as runnerctl_main
from runnerd.events import EventLog
from runnerd.history import History
from runnerd.provider import RunnerdProvider

from rungar.testing.clock import FakeClock
from tests.unit.sizing_fixtures import light_history
from tests.unit.test_runnerd_provider import FakeRuntime, G
from tests.waiting import WAIT, until


async def test_a_follower_gets_an_event_another_writer_recorded(tmp_path: Path) -> None:
    db = tmp_path / "history.db"
    daemon_side = EventLog(db)
    other = EventLog(db)  # runnerctl sizing apply, in its own process
    try:
        first = daemon_side.record(1.0, "slice.changed", "runnerd.slice", "MemoryMax 8G")
        waiting = asyncio.create_task(daemon_side.wait(first.id, timeout=30, poll=0.01))
        await asyncio.sleep(0)
        assert not waiting.done()
        other.record(2.0, "sizing.changed", "node", "node: memory 7G → 6G", source="apply")
        (event,) = await asyncio.wait_for(waiting, WAIT)
        assert (event.kind, event.data["source"]) == ("sizing.changed", "apply")
        assert [e.id for e in daemon_side.after(0)] == [first.id, event.id]
    finally:
        daemon_side.close()
        other.close()


async def test_a_wait_with_nothing_new_answers_none_after_its_timeout(tmp_path: Path) -> None:
    events = EventLog(tmp_path / "history.db")
    try:
        assert await events.wait(0, timeout=0) == []
    finally:
        events.close()


def test_sizing_apply_by_hand_is_a_sizing_changed_event(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "history.db"
    light_history(db, now=time.time())  # runnerctl reads the last 30 days back from now
    path = tmp_path / "runnerd.toml"
    path.write_text(
        f'[host]\nmemory_max = "33G"\nhistory = "{db}"\n\n[profiles.node]\n'
        'command = ["true"]\ncpus = 8\nmemory = "7G"\nslots = 2\n'
    )
    assert runnerctl_main(["-c", str(path), "sizing", "apply", "node"]) == 0, capsys.readouterr()
    events = EventLog(db)
    try:
        (event,) = events.after(0)
    finally:
        events.close()
    assert (event.kind, event.subject, event.data["source"]) == ("sizing.changed", "node", "apply")
    assert event.data["old"]["memory"] == 7 * 1024**3 and event.data["new"]["memory"] == 3 * 1024**3


async def test_stopping_the_api_answers_a_follower_s_long_poll_at_once(tmp_path: Path) -> None:
    history = History(tmp_path / "history.db")
    text = f'[host]\nmemory_max = "33G"\nstate_dir = "{tmp_path}"\n'
    provider = RunnerdProvider(parse_config(text), FakeRuntime(), history, FakeClock(), 33 * G, 8.0)
    provider.events = EventLog(tmp_path / "history.db")
    socket = Path(tempfile.mkdtemp(prefix="rdev", dir="/tmp")) / "runnerd.sock"
    api = await serve_api(provider, str(socket))
    transport = httpx.AsyncHTTPTransport(uds=str(socket))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://runnerd") as client:
            poll = asyncio.create_task(client.get("/events", params={"wait": 60}, timeout=90))
            in_flight = api._server.server_state.tasks  # uvicorn's requests being answered
            await until(lambda: bool(in_flight), "saw the poll reach the API")
            # Without the answer, stop() waits out the poll's 60 s and this times out.
            await asyncio.wait_for(api.stop(), WAIT)
            answer = await asyncio.wait_for(poll, WAIT)
        assert answer.json() == {"events": []}
    finally:
        provider.events.close()
        history.close()
        socket.unlink(missing_ok=True)
        socket.parent.rmdir()


def test_a_new_follower_starts_after_the_newest_event(tmp_path: Path) -> None:
    events = EventLog(tmp_path / "history.db")
    try:
        assert events.last_id() == 0
        events.record(1.0, "slice.changed", "runnerd.slice", "MemoryMax 8G")
        newest = events.record(2.0, "sizing.changed", "node", "node: memory 7G → 6G")
        assert events.last_id() == newest.id and events.after(events.last_id()) == []
    finally:
        events.close()
