"""Shared by every test: each test starts with the logging configuration the session had.

Commands run in-process (``rungar doctor``, ``runnerd``'s CLI, the plugins' servers) configure
structlog and the standard library's logging for their process, as they must; inside one
pytest process that would leak into later tests, whose ``capture_logs()`` then sees nothing
below the level the command chose.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import pytest
import structlog

# The tests of runnerd simulate's engine subclass and patch its classes, which they can do only to
# the Python sources: its compiled build is compared with them in processes of its own
# (tests/integration/test_simulate_compiled.py). Set before any test imports runnerd.simulate.
os.environ["RUNNERD_SIMULATE_COMPILED"] = "0"


@pytest.fixture(autouse=True)
def _logging_as_the_session_had_it() -> Iterator[None]:
    config = structlog.get_config()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    structlog.configure(**config)
    root.handlers[:] = handlers
    root.setLevel(level)
