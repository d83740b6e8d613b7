"""structlog, configured once per entry point: JSON when not a TTY, text otherwise, to stderr.

A redaction processor blanks every value whose key looks like a secret (token, key, JIT config,
password, secret, authorization), whatever the caller passed: a secret never reaches a log.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog

SECRET_KEY = re.compile(
    r"(token|secret|password|passwd|jit|private_key|authorization|api_key)", re.I
)
REDACTED = "[redacted]"


def redact(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key in list(event):
        if SECRET_KEY.search(key):
            event[key] = REDACTED
    return event


def configure(level: str = "info", fmt: str = "auto") -> None:
    numeric = getattr(logging, level.upper(), logging.INFO)
    json_out = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    renderer: Any = (
        structlog.processors.JSONRenderer() if json_out else structlog.dev.ConsoleRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            redact,
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
