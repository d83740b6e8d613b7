"""Make sure the proxy tests have a forward proxy (Debian's squid) before any test runs.

``make test`` (and ``make unit``) run this first, with the system's ``python3`` alone, as they
run tools/ensure_chromium.py. The proxy is found as the tests find it (tests/forward_proxy.py):
``$RUNGAR_SQUID``, else ``squid`` on ``PATH`` or in ``/usr/sbin``. When there is none:

- as root on a machine with ``apt-get``, it installs Debian's ``squid`` package and goes on (a
  few seconds; the tests run their own squid on a free loopback port, with a configuration of
  their own, whatever the package's service does);
- otherwise it stops at once, exit 2, with the one command that installs it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping

INSTALL = ("install", "-y", "-qq", "--no-install-recommends", "squid")
SEARCH = "/usr/sbin:/usr/local/sbin"


def find_squid(environ: Mapping[str, str]) -> str | None:
    """The squid binary the proxy tests will run, or None."""
    given = environ.get("RUNGAR_SQUID", "")
    if given:
        return shutil.which(given)
    path = os.pathsep.join(p for p in (environ.get("PATH", ""), SEARCH) if p)
    return shutil.which("squid", path=path)


def main(environ: Mapping[str, str] = os.environ) -> int:
    if find_squid(environ):
        return 0
    apt = shutil.which("apt-get", path=environ.get("PATH"))
    if os.geteuid() != 0 or apt is None:
        command = (
            "sudo apt-get install -y --no-install-recommends squid"
            if apt is not None
            else "install squid with your system's package manager, or set RUNGAR_SQUID"
        )
        print(
            "no squid found: the proxy tests need one. Run:\n\n"
            f"    {command}\n\nthen run make test again.",
            file=sys.stderr,
        )
        return 2
    print(
        "no squid found: installing Debian's squid package for the proxy tests "
        "(apt-get install squid)",
        file=sys.stderr,
        flush=True,
    )
    child = dict(environ, DEBIAN_FRONTEND="noninteractive")
    for argv in ((apt, "update", "-qq"), (apt, *INSTALL)):
        done = subprocess.run(argv, env=child, check=False)  # noqa: S603 (fixed argv)
        if done.returncode != 0:
            print(
                f"{' '.join(argv)} failed (exit {done.returncode}): install Debian's squid "
                "package, or set RUNGAR_SQUID to a squid binary",
                file=sys.stderr,
            )
            return 2
    if found := find_squid(environ):
        print(f"squid installed: {found}", file=sys.stderr)
        return 0
    print("apt-get installed squid but none is found: set RUNGAR_SQUID", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
