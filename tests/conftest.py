"""Shared by every test: each test starts with the logging configuration the session had.

Commands run in-process (``rungar doctor``, ``runnerd``'s CLI, the plugins' servers) configure
structlog and the standard library's logging for their process, as they must; inside one
pytest process that would leak into later tests, whose ``capture_logs()`` then sees nothing
below the level the command chose.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import structlog


@pytest.fixture(autouse=True)
def _logging_as_the_session_had_it() -> Iterator[None]:
    config = structlog.get_config()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    structlog.configure(**config)
    root.handlers[:] = handlers
    root.setLevel(level)
