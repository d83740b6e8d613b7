"""``rungar __complete KIND``: the names a shell completion asks the daemon for.

The completion scripts of ``rungar completion`` run it for a scale set, provider or runner name
(docs/cli.md, "Completion"). It prints one name a line, and nothing at all when the daemon does
not answer within ``ASK_TIMEOUT``: a completion never hangs the shell or prints an error into
the user's command line.
"""

from __future__ import annotations

import sys

# What a name is asked of the daemon for: the kinds ``rungar __complete`` knows.
KINDS = ("scale-sets", "providers", "runners")
ASK_TIMEOUT = 1.0  # seconds a completion waits for the daemon before completing nothing


def complete_names(argv: list[str]) -> int:
    """``rungar __complete KIND [--socket PATH]``: the names of KIND the daemon knows, one a
    line; nothing (and exit 0) when it does not answer within ``ASK_TIMEOUT``, so a shell's
    completion never hangs or prints an error."""
    import asyncio
    import os

    from rungar.cli.socket import DEFAULT_SOCKET

    kind = argv[0] if argv else ""
    if kind not in KINDS:
        return 2
    path = os.environ.get("RUNGAR_SOCKET") or DEFAULT_SOCKET
    if "--socket" in argv[1:-1]:
        path = argv[argv.index("--socket", 1) + 1]

    async def ask() -> list[str]:
        from rungar.rpc.admin_client import AdminClient

        async with AdminClient(path) as client:
            status = await client.status()
        if kind == "scale-sets":
            return [s["name"] for s in status.get("scale_sets", [])]
        if kind == "providers":
            return [p["name"] for p in status.get("providers", [])]
        return [r["name"] for r in status.get("runners", [])]

    from rungar.errors import RungarError

    # A completion says nothing rather than print an error into the user's command line.
    try:
        names = asyncio.run(asyncio.wait_for(ask(), ASK_TIMEOUT))
    except (RungarError, TimeoutError, OSError):
        return 0
    sys.stdout.write("".join(f"{name}\n" for name in names))
    return 0
