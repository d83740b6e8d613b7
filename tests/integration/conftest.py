"""Fixtures the integration tests share."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog


@pytest.fixture
def quiet_logs() -> Iterator[None]:
    """Log lines captured, not printed: a daemon's would otherwise land in a CLI's stdout."""
    with structlog.testing.capture_logs():
        yield


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory under /tmp: pytest's tmp_path can be longer than a unix socket path may be."""
    directory = Path(tempfile.mkdtemp(prefix="rgi", dir="/tmp"))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)
