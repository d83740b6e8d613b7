"""A scripted engine for the fleet page's tests: the status document and events it answers are
whatever the test last set, so a test can change the fleet and watch the page follow."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any


def status(runners: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "daemon": {"ready": True, "readiness": "ready", "version": "0", "now": 1000.0},
        "scale_sets": [
            {
                "name": "linux",
                "status": "LISTENING",
                "note": "",
                "runners": len(runners),
                "busy": 0,
                "desired": len(runners),
                "assigned": 0,
                "min": 0,
                "max": 4,
                "providers": ["host"],
            }
        ],
        "providers": [
            {
                "name": "host",
                "type": "runnerd",
                "status": "HELD for big (priority 10), renewed while it asks",
                "runners": len(runners),
                "max_runners": 0,
                "reachable": True,
                "error": "",
            }
        ],
        "skips": [],
        "runners": runners,
    }


class ScriptedEngine:
    """What the engine would answer: a status document and the events since a time."""

    def __init__(self) -> None:
        self.status = status([])
        self.events: list[dict[str, Any]] = []

    def read(self, since: float, seen: int) -> dict[str, Any]:
        found = [e for e in self.events if e["time"] >= since][seen if since else 0 :]
        return {"status": copy.deepcopy(self.status), "events": found}

    @staticmethod
    def call(callback: Callable[[], None]) -> None:
        callback()  # the listener's loop stands in for the engine's here
