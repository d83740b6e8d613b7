"""Leave nothing of a demo behind: its processes, its cgroups, its temporary folders.

A demo's world is its folder (``rungar-demo-*``), the provider plugins' folders
(``rungar-aws-*``), the processes it started and the cgroups its hosts made (their slices are
named after the demo's folder). :func:`sweep` removes all of it once the demo's own processes
have ended or were given their grace: first every process still holding a file or its working
directory in one of the folders, or still in one of the cgroups, is killed; then the cgroups
are removed, deepest first; then the folders.

After an orderly stop the demo calls :func:`sweep` itself. A second Ctrl-C ends the demo at
once, so :func:`sweep_later` hands the same work to a detached ``python -m rungar.demo.sweep``
that waits for the demo's hosts and plugins to stop by themselves (they were sent SIGTERM),
kills them after ``grace`` seconds, and then sweeps. Only the standard library is imported.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

CGROUP_ROOTS = ("/sys/fs/cgroup", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/unified")
FORCED_GRACE = 20.0  # seconds the hosts get to stop their runners after a second Ctrl-C
POLL = 0.1


def _alive(pid: int) -> bool:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return text.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _under(path: str, folders: Iterable[str]) -> bool:
    return any(path == f or path.startswith(f + "/") for f in folders)


def holders(folders: list[str], proc: str = "/proc") -> set[int]:
    """Processes (other than this one) with a file or their working directory in ``folders``."""
    me = os.getpid()
    found: set[int] = set()
    for entry in Path(proc).iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        with contextlib.suppress(OSError):
            if _under(os.readlink(entry / "cwd"), folders):
                found.add(int(entry.name))
                continue
            for fd in (entry / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if _under(os.readlink(fd), folders):
                        found.add(int(entry.name))
                        break
    return found


def cgroups(tag: str, roots: Iterable[str] = CGROUP_ROOTS) -> list[Path]:
    """The cgroups named after the demo (``tag`` in their name), each with its children,
    deepest first."""
    found: list[Path] = []
    for root in roots:
        with contextlib.suppress(OSError):
            for top in Path(root).iterdir():
                if tag in top.name and top.is_dir():
                    found.extend(sorted((p for p in top.rglob("*") if p.is_dir()), reverse=True))
                    found.append(top)
    return found


def _members(group: Path) -> set[int]:
    with contextlib.suppress(OSError, ValueError):
        return {int(line) for line in (group / "cgroup.procs").read_text().split()}
    return set()


def sweep(folders: list[str], tag: str, *, remove: bool = True) -> None:
    """Kill what is left of the demo, remove its cgroups, then (``remove``) its folders."""
    folders = [os.path.realpath(f) for f in folders if f]
    groups = cgroups(tag) if tag else []
    for _ in range(50):  # a killed process may leave children that still hold a file
        left = holders(folders) | {pid for g in groups for pid in _members(g)}
        left.discard(os.getpid())
        if not left:
            break
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        end = time.monotonic() + 5.0
        while any(_alive(p) for p in left) and time.monotonic() < end:
            time.sleep(POLL)
    for group in groups:
        with contextlib.suppress(OSError):
            group.rmdir()
    for folder in folders if remove else []:
        shutil.rmtree(folder, ignore_errors=True)


def wait_then_sweep(pids: list[int], folders: list[str], tag: str, grace: float) -> None:
    """Give ``pids`` (sent SIGTERM already) ``grace`` seconds to end, then sweep."""
    end = time.monotonic() + grace
    while any(_alive(p) for p in pids) and time.monotonic() < end:
        time.sleep(POLL)
    for pid in pids:
        if _alive(pid):
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    sweep(folders, tag)


def sweep_later(pids: list[int], folders: list[str], tag: str, grace: float = FORCED_GRACE) -> None:
    """Start a detached sweeper for a demo that is ending at once; it outlives this process."""
    given = json.dumps({"pids": pids, "folders": folders, "tag": tag, "grace": grace})
    with contextlib.suppress(OSError):
        subprocess.Popen(  # noqa: S603 - this interpreter, this module
            [sys.executable, "-m", "rungar.demo.sweep", given],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # not in the terminal's group: a Ctrl-C there is not its
            close_fds=True,
            cwd="/",
        )


def main(argv: list[str]) -> int:
    given = json.loads(argv[0])
    wait_then_sweep(
        [int(p) for p in given["pids"]],
        [str(f) for f in given["folders"]],
        str(given["tag"]),
        float(given["grace"]),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
