"""A scale set's phase: where its listener stands with GitHub, in one vocabulary for the
listener, the engine, ``rungar status`` and readiness (docs/concepts.md, "Phase")."""

from __future__ import annotations

from enum import StrEnum


class Phase(StrEnum):
    STARTING = "STARTING"  # finding or creating the scale set, opening its message session
    LISTENING = "LISTENING"  # its message session is open: GitHub's news arrives
    WAITING = "WAITING"  # another session (another daemon) holds the scale set
    UNREACHABLE = "UNREACHABLE"  # GitHub fails the listener's calls
