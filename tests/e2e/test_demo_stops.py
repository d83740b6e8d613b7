"""Nothing of a demo is left however it is stopped: one Ctrl-C, two, SIGTERM, its terminal hung up.

Each test starts ``rungar demo`` as a real process with a burst of long jobs, waits until its
hosts run runners, notes every process the demo started (its descendants), the AWS plugin's
folder and the hosts' cgroups, stops it, and then waits for all of them to be gone: the demo's
folder (``rungar-demo-*``, with its token, databases and sockets), the plugin's folder
(``rungar-aws-*``), every process, every cgroup named after the demo. After one Ctrl-C the
summary says what ran until then. The double Ctrl-C (what the quick start's reader does) runs in
``make test``; the other ways take as long each and run under ``make test-long``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import re
import signal
import subprocess
import sys
import termios
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from rungar.demo.sweep import cgroups
from rungar.rpc.plugin import SOCKET_ENV
from tests.waiting import WAIT, accepting, until_sync

RUNGAR = str(Path(sys.executable).parent / "rungar")
# The quick start's burst: its runners run for half a minute or so, so some are running when the
# demo is stopped.
ARGS = ["demo", "--no-live"]


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def alive(pid: int) -> bool:
    fields = _stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def descendants(root: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(int(entry.name))) is not None:
            parents[int(entry.name)] = int(fields[1])
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def plugin_folders(pids: set[int]) -> set[str]:
    """The folders of the plugins among ``pids`` (their socket is named in their environment)."""
    found = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            for item in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                if item.startswith(SOCKET_ENV.encode() + b"="):
                    found.add(str(Path(item.split(b"=", 1)[1].decode()).parent))
    return found


@dataclass
class Demo:
    process: subprocess.Popen[bytes]
    output: Path
    folder: Path = Path()
    started: set[int] = field(default_factory=set)
    plugins: set[str] = field(default_factory=set)
    groups: list[Path] = field(default_factory=list)

    def text(self) -> str:
        return self.output.read_text(errors="replace")

    def wait_for_runners(self) -> None:
        def printed_folder() -> str:
            if self.process.poll() is not None:
                pytest.fail(f"the demo ended ({self.process.returncode}): {self.text()}")
            found = re.search(r"files in (\S+)", self.text())
            return found.group(1) if found else ""

        self.folder = Path(until_sync(printed_folder, "printed its folder"))
        until_sync(
            lambda: any(self.folder.glob("host*/runners/*")) and "Dashboards:" in self.text(),
            "ran a runner on a host",
        )
        self.started = descendants(self.process.pid)
        self.plugins = plugin_folders(self.started)
        self.groups = cgroups(self.folder.name)
        assert self.plugins, "the AWS plugin runs"

    def left(self) -> list[str]:
        """What is still there of the demo."""
        found = [str(p) for p in [self.folder, *map(Path, self.plugins)] if p.exists()]
        found += [f"process {pid}" for pid in sorted(self.started) if alive(pid)]
        found += [str(g) for g in cgroups(self.folder.name)]
        return found

    def nothing_left(self) -> None:
        until_sync(lambda: not self.left(), "removed everything it made", every=0.2)


@pytest.fixture
def started(tmp_path: Path) -> Iterator[tuple[Path, list[subprocess.Popen[bytes]]]]:
    made: list[subprocess.Popen[bytes]] = []
    yield tmp_path / "demo.out", made
    for process in made:
        if process.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(process.pid, signal.SIGTERM)
            process.wait(WAIT)


def start(given: tuple[Path, list[subprocess.Popen[bytes]]], *more: str, **kwargs: object) -> Demo:
    output, made = given
    with output.open("wb") as out:
        process = subprocess.Popen(  # type: ignore[call-overload]  # kwargs: the tty's own
            [RUNGAR, *ARGS, *more],
            stdout=kwargs.pop("stdout", out),
            stderr=kwargs.pop("stderr", subprocess.STDOUT),
            env=dict(os.environ, PYTHONUNBUFFERED="1", COLUMNS="132"),
            **({"start_new_session": True} | kwargs),
        )
    made.append(process)
    return Demo(process, output)


def checked(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=WAIT, check=False)


def test_the_demos_links_open_and_two_ctrl_cs_end_it_at_once_leaving_nothing(
    started: tuple[Path, list[subprocess.Popen[bytes]]],
) -> None:
    # A burst long enough that the demo is still running when the checks below are done, on
    # a busy machine too (the default burst may end, and its folder go, before them).
    demo = start(started, "--small", "400")
    demo.wait_for_runners()
    # Every page it lists opens: the fleet page, and each host's through its login link.
    links = re.findall(
        r"^  (?:fleet page|runnerd host\d)\s+(http://127\.0\.0\.1:\S+)$", demo.text(), re.M
    )
    assert len(links) == 4 and all("?token=" in link for link in links[1:]), demo.text()
    for link in links:
        assert httpx.get(link, follow_redirects=True, timeout=WAIT).status_code == 200, link
    # Its files pass its own checks, with nothing to warn about (once its daemon's admin
    # socket is up: runners can come before it on a busy machine).
    until_sync(lambda: accepting(demo.folder / "rungar.sock"), "the daemon's socket listening")
    doctor = checked(RUNGAR, "doctor", "-c", str(demo.folder / "rungar.yaml"))
    assert doctor.returncode == 0 and " 0 warn, 0 fail" in doctor.stdout, doctor.stdout
    valid = checked(RUNGAR, "validate", "--verbose", str(demo.folder / "scale_sets.yaml"))
    assert valid.returncode == 0 and "arning" not in valid.stdout + valid.stderr, valid.stderr

    demo.process.send_signal(signal.SIGINT)
    until_sync(lambda: "Stopping the demo" in demo.text(), "said it is stopping")
    demo.process.send_signal(signal.SIGINT)

    assert demo.process.wait(WAIT) == 130
    demo.nothing_left()


@pytest.mark.long
def test_one_ctrl_c_stops_the_demo_with_a_true_summary_and_leaves_nothing(
    started: tuple[Path, list[subprocess.Popen[bytes]]],
) -> None:
    demo = start(started)
    demo.wait_for_runners()

    demo.process.send_signal(signal.SIGINT)

    assert demo.process.wait(WAIT) == 0
    demo.nothing_left()
    text = demo.text()
    run = re.search(r"jobs run\s*│?\s*(\d+) of (\d+)", text)
    assert run, text
    runners = re.search(r"runners per provider\s*│?\s*([^│\n]*)", text)
    assert runners and runners.group(1).strip() != "none", text  # runners ran before the stop


@pytest.mark.long
def test_sigterm_stops_the_demo_and_leaves_nothing(
    started: tuple[Path, list[subprocess.Popen[bytes]]],
) -> None:
    demo = start(started)
    demo.wait_for_runners()

    demo.process.send_signal(signal.SIGTERM)

    assert demo.process.wait(WAIT) == 0
    demo.nothing_left()


def _controlling_terminal() -> None:
    """In the child, after its setsid: its stdin (the pty) becomes its controlling terminal."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


@dataclass
class AtATerminal(Demo):
    """A demo whose output is a pty: what the terminal shows is copied to ``output`` as read."""

    terminal: int = -1

    def text(self) -> str:
        with self.output.open("ab") as out, contextlib.suppress(OSError):  # EAGAIN: read it all
            while chunk := os.read(self.terminal, 65536):
                out.write(chunk)
        return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", super().text())  # the terminal's colours


@pytest.mark.long
def test_the_demos_terminal_hanging_up_stops_it_and_leaves_nothing(
    started: tuple[Path, list[subprocess.Popen[bytes]]],
) -> None:
    terminal, tty = pty.openpty()
    os.set_blocking(terminal, False)
    plain = start(started, stdin=tty, stdout=tty, stderr=tty, preexec_fn=_controlling_terminal)
    os.close(tty)
    demo = AtATerminal(plain.process, plain.output, terminal=terminal)
    demo.wait_for_runners()

    os.close(terminal)  # the terminal goes: the kernel sends its session leader SIGHUP

    assert demo.process.wait(WAIT) == 0
    demo.nothing_left()
