"""A loopback GitHub for tests and the demo: REST, the Actions service, the message queue, webhooks.

It implements §7 of ``docs/github-scaleset-protocol.md``: the state of §7.1, the endpoints and
status codes of §7.2, the dispatcher of §7.3, the control API of §7.4 and the faults of §7.5.
Start it with ``async with GitHubEmulator(EmulatorOptions(...)) as emu:`` and point Rungar at
``emu.org_url`` with the PAT ``emulator-pat``.
"""

from rungar.testing.github_emulator.clock import EmulatorClock, InstantClock
from rungar.testing.github_emulator.faults import Fault, FaultKind
from rungar.testing.github_emulator.model import JobSpec, JobState
from rungar.testing.github_emulator.server import GitHubEmulator
from rungar.testing.github_emulator.state import EmulatorOptions, EmulatorState

__all__ = [
    "EmulatorClock",
    "EmulatorOptions",
    "EmulatorState",
    "Fault",
    "FaultKind",
    "GitHubEmulator",
    "InstantClock",
    "JobSpec",
    "JobState",
]
