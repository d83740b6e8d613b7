"""A loopback GitHub for tests and the demo: REST, the Actions service, the message queue, webhooks.

It implements what docs/github-emulator.md describes: the service's state, its endpoints and
status codes, the dispatcher, the control API and the faults.
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
