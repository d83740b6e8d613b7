"""Shared by every test: each test starts with the logging configuration the session had, and
gRPC's asyncio runtime stays up for the whole session.

Commands run in-process (``rungar doctor``, ``runnerd``'s CLI, the plugins' servers) configure
structlog and the standard library's logging for their process, as they must; inside one
pytest process that would leak into later tests, whose ``capture_logs()`` then sees nothing
below the level the command chose.

gRPC's asyncio runtime (its completion queue and the thread that polls it) starts with the first
channel or server of a process and shuts down when the last one is gone, joining that thread.
In a test process that happens over and over: every ``AdminClient`` a test polls the daemon
with, when nothing else of gRPC is alive in the process, starts it and shuts it down again. A
shutdown can wait forever on that thread (it may be blocked writing its wake-up byte to a socket
the event loop no longer reads: https://github.com/grpc/grpc/pull/40989), hanging the test, and
a test timeout raised inside it is swallowed, leaving the runtime half shut for the tests after
it. One reference held for the session keeps the runtime up, so no test shuts it down.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import grpc.aio
import pytest
import structlog


def pytest_configure(config: pytest.Config) -> None:
    # why the ignore: grpc-stubs do not declare init_grpc_aio, which grpc.aio exports
    grpc.aio.init_grpc_aio()  # type: ignore[attr-defined]  # never released (see above)


@pytest.fixture(autouse=True)
def _logging_as_the_session_had_it() -> Iterator[None]:
    config = structlog.get_config()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    structlog.configure(**config)
    root.handlers[:] = handlers
    root.setLevel(level)
