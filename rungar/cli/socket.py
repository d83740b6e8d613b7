"""Where the daemon listens, and how a CLI command asks it (docs/commands.md).

The socket is ``--socket PATH``, else ``$RUNGAR_SOCKET``, else ``/run/rungar/rungar.sock``.
:func:`ask` runs one command's conversation with the daemon and turns its failures into exit
codes: 1 when the daemon cannot be asked or refuses at runtime, 2 when it says the request is
malformed or names a scale set, provider or runner it does not know (its answer names the
closest one). grpc is imported only here, when a command actually runs, so ``rungar --help``
stays quick.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rungar.rpc.admin_client import AdminClient

DEFAULT_SOCKET = "/run/rungar/rungar.sock"
ENV_SOCKET = "RUNGAR_SOCKET"
EXIT_OK = 0
EXIT_RUNTIME = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
# The daemon's refusals that are the command line's mistake: a malformed request, a name it
# does not know.
USAGE_CODES = ("invalid_argument", "not_found")


def add_socket_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--socket",
        metavar="PATH",
        help=f"the daemon's admin socket (default: ${ENV_SOCKET}, else {DEFAULT_SOCKET})",
    )


def socket_path(args: argparse.Namespace) -> str:
    chosen: str | None = getattr(args, "socket", None)
    return chosen or os.environ.get(ENV_SOCKET) or DEFAULT_SOCKET


def ask(args: argparse.Namespace, work: Callable[[AdminClient], Awaitable[int]]) -> int:
    """Run ``work`` with a client of the daemon; errors are printed and become exit codes."""
    from rungar.rpc.admin_client import AdminClient, AdminError, DaemonUnreachable

    async def converse() -> int:
        async with AdminClient(socket_path(args)) as client:
            return await work(client)

    try:
        return asyncio.run(converse())
    except DaemonUnreachable as e:
        print(f"rungar: {e}", file=sys.stderr)
        return EXIT_RUNTIME
    except AdminError as e:
        print(f"rungar: {e}", file=sys.stderr)
        return EXIT_USAGE if e.code in USAGE_CODES else EXIT_RUNTIME
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
