"""Make sure the browser tests have a Chromium before any test runs.

``make test`` (and ``make unit``, ``make screenshots``) run this first, with the system's
``python3`` alone, before the virtual environment is built. The browser is found as the tests find
it (tests/browser/conftest.py): ``$RUNGAR_CHROMIUM``, else ``chromium`` or ``chromium-browser`` on
``PATH``. When there is none:

- as root on a machine with ``apt-get``, it installs Debian's ``chromium`` package and goes on;
- otherwise it stops at once, exit 2, with the one command that installs it.

``RUNGAR_CHROMIUM_NAMES`` (space-separated) replaces the names looked up on ``PATH``, so the
missing-browser path can be tried on a machine that has one (``docs/testing.md``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_NAMES = ("chromium", "chromium-browser")
INSTALL = ("apt-get", "install", "-y", "-qq", "--no-install-recommends", "chromium")


def candidates(environ: Mapping[str, str]) -> list[str]:
    """The names tried, in order: ``$RUNGAR_CHROMIUM`` first, then the browser's usual names."""
    names = environ.get("RUNGAR_CHROMIUM_NAMES", "").split() or list(DEFAULT_NAMES)
    first = environ.get("RUNGAR_CHROMIUM", "")
    return [first, *names] if first else names


def find_chromium(environ: Mapping[str, str]) -> str | None:
    """The Chromium binary the browser tests will drive, or None."""
    path = environ.get("PATH")
    for name in candidates(environ):
        if found := shutil.which(name, path=path):
            return found
    return None


@dataclass(frozen=True)
class Step:
    """What to do about a missing browser: install it here, or tell the user how."""

    install: bool
    message: str


def decide(*, is_root: bool, has_apt: bool) -> Step:
    """The step for a machine without Chromium (a pure function of what the machine allows)."""
    if is_root and has_apt:
        return Step(
            True,
            "no Chromium found: installing Debian's chromium package for the browser tests "
            "(apt-get install chromium)",
        )
    if has_apt:
        command = "sudo apt-get install -y --no-install-recommends chromium"
    else:
        command = "install Chromium with your system's package manager, or set RUNGAR_CHROMIUM"
    return Step(
        False,
        "no Chromium found: the browser tests need one. Run:\n\n"
        f"    {command}\n\n"
        "then run make test again (or point RUNGAR_CHROMIUM at a Chromium binary).",
    )


def main(environ: Mapping[str, str] = os.environ) -> int:
    if find_chromium(environ):
        return 0
    apt = shutil.which("apt-get", path=environ.get("PATH"))
    step = decide(is_root=os.geteuid() == 0, has_apt=apt is not None)
    print(step.message, file=sys.stderr, flush=True)
    if not step.install:
        return 2
    assert apt is not None
    child = dict(environ, DEBIAN_FRONTEND="noninteractive")
    for argv in ((apt, "update", "-qq"), (apt, *INSTALL[1:])):
        done = subprocess.run(argv, env=child, check=False)  # noqa: S603 (fixed argv)
        if done.returncode != 0:
            print(
                f"{' '.join(argv)} failed (exit {done.returncode}): install Debian's chromium "
                "package, or set RUNGAR_CHROMIUM to a Chromium binary",
                file=sys.stderr,
            )
            return 2
    if found := find_chromium(environ):
        print(f"Chromium installed: {found}", file=sys.stderr)
        return 0
    print(
        "apt-get installed chromium but no Chromium is on PATH: set RUNGAR_CHROMIUM to its binary",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main())
