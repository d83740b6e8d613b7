"""The fleet page's sampler: each event reaches the open pages once, even when several share
a timestamp across two samples; the runners-over-time series keeps only ``history``; a page
that does not keep up is dropped rather than waited for."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rungar.web.fleet.feed import QUEUE_DEPTH, Feed, engine_read
from tests.integration.fleet_script import status


class Control:
    """What the feed asks of the daemon's Control: events since a time, and the status."""

    def __init__(self) -> None:
        self.kept: list[dict[str, Any]] = []
        self.now = 1000.0

    def add(self, time: float, name: str) -> None:
        self.kept.append({"time": time, "name": name, "action": "created"})

    def events(self, *, since: float = 0.0, limit: int = 0) -> list[dict[str, Any]]:
        found = [e for e in self.kept if e["time"] >= since]
        return found[-limit:] if limit else found

    def status(self) -> dict[str, Any]:
        document = status([])
        document["daemon"]["now"] = self.now
        return document


def at_once(callback: Callable[[], None]) -> None:
    callback()


async def sample(feed: Feed) -> list[str]:
    return [e["name"] for e in feed.absorb(await feed.ask()).events]


async def test_events_sharing_a_timestamp_across_two_samples_are_each_sent_once() -> None:
    control = Control()
    feed = Feed(engine_read(control), at_once)
    control.add(1.0, "a")
    control.add(2.0, "b")
    assert await sample(feed) == ["a", "b"]
    control.add(2.0, "c")  # the same time as b, after b was sent
    assert await sample(feed) == ["c"]
    assert await sample(feed) == []
    control.add(2.0, "d")
    control.add(3.0, "e")
    assert await sample(feed) == ["d", "e"]
    assert [e["name"] for e in feed.recent] == ["a", "b", "c", "d", "e"]


async def test_runners_over_time_keep_only_the_history_and_a_slow_page_is_dropped() -> None:
    control = Control()
    feed = Feed(engine_read(control), at_once, history=60.0)
    queue = feed.open_stream()
    assert queue is not None and feed.streams == 1
    for step in range(QUEUE_DEPTH + 2):  # the page reads nothing
        control.now = 1000.0 + 30.0 * step
        await sample(feed)
    assert [p.time for p in feed.points] == [1210.0, 1240.0, 1270.0]
    assert feed.streams == 0  # dropped, and told so by the end of its stream
    items = [queue.get_nowait() for _ in range(queue.qsize())]
    assert items[-1] is None
