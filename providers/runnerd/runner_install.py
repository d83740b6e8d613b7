"""The GitHub Actions runner version of the install runnerd's profiles start, told to Rungar in
``Info`` (docs/runnerd.md, "The runner version").

The install is ``[host] runner_dir``, or else the folder of the ``run.sh`` (or
``bin/Runner.Listener``) a process profile's command starts; its version is what
``bin/Runner.Listener --version`` prints. When there is no install to ask (the docker runtime's
image, a wrapper command) or it does not answer, ``[host] runner_version`` is told. What the
listener prints is read as untrusted: a bounded read, a version's form, a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from rungar.clock import Clock
from rungar.model.runner_version import RunnerVersion, parse_runner_version
from runnerd.config import RunnerdConfig, RuntimeKind

LISTENER = os.path.join("bin", "Runner.Listener")
STARTERS = ("run.sh", "run-helper.sh", "config.sh")  # an install's scripts, at its top
READ_TIMEOUT = 10.0  # seconds Runner.Listener --version may take
READ_BYTES = 4096
KEEP_FOR = 60.0  # seconds an answer is kept: Info is asked often, the install changes rarely
_VERSION = re.compile(r"\bv?\d{1,9}\.\d{1,9}\.\d{1,9}\b")


def install_of(command: Sequence[str]) -> str:
    """The runner install a command starts: the folder of its ``run.sh``, or the parent of the
    ``bin`` of its ``Runner.Listener``; "" when it starts something else."""
    if not command:
        return ""
    program = Path(command[0])
    if program.name in STARTERS:
        return str(program.parent)
    if program.name == "Runner.Listener" and program.parent.name == "bin":
        return str(program.parent.parent)
    return ""


def installs(config: RunnerdConfig) -> list[str]:
    """Every runner install the configuration starts, each once."""
    if config.host.runner_dir:
        return [config.host.runner_dir]
    if config.host.runtime is not RuntimeKind.PROCESS:
        return []
    found = (install_of(p.command) for p in config.profiles.values())
    return sorted({f for f in found if f})


def version_in(output: bytes) -> RunnerVersion | None:
    """The first version ``Runner.Listener --version`` printed (``2.330.0``)."""
    found = _VERSION.search(output[:READ_BYTES].decode("utf-8", "replace"))
    return parse_runner_version(found.group(0)) if found else None


async def listener_version(install: str, timeout: float = READ_TIMEOUT) -> RunnerVersion | None:
    """What ``INSTALL/bin/Runner.Listener --version`` says; None when it is not there, does
    not answer within ``timeout`` or prints no version."""
    listener = os.path.join(install, LISTENER)
    if not os.path.isfile(listener):
        return None
    try:
        process = await asyncio.create_subprocess_exec(
            listener,
            "--version",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
    except OSError:
        return None
    try:
        assert process.stdout is not None  # asked for above
        output = await asyncio.wait_for(process.stdout.read(READ_BYTES), timeout)
    except TimeoutError:
        output = b""
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
    return version_in(output)


def oldest(versions: Iterable[RunnerVersion | None]) -> RunnerVersion | None:
    """The oldest version read: the one GitHub would refuse or stop first."""
    known = [v for v in versions if v is not None]
    return min(known) if known else None


class RunnerVersionReader:
    """The version told in Info: the installs' oldest, else ``[host] runner_version``, each
    answer kept ``KEEP_FOR`` seconds."""

    def __init__(self, config: RunnerdConfig, clock: Clock) -> None:
        self.config = config
        self.clock = clock
        self._kept: tuple[float, str] | None = None

    async def version(self) -> str:
        now = self.clock.now()
        if self._kept is not None and now - self._kept[0] < KEEP_FOR:
            return self._kept[1]
        found = oldest([await listener_version(i) for i in installs(self.config)])
        told = str(found) if found is not None else self.config.host.runner_version
        self._kept = (now, told)
        return told
