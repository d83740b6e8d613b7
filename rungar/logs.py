"""structlog, configured once per entry point: JSON when not a TTY, text otherwise, to stderr.

A redaction processor blanks every value whose key looks like a secret (token, key, JIT config,
password, secret, authorization), whatever the caller passed: a secret never reaches a log.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from collections.abc import MutableMapping
from typing import Any

import structlog

from rungar.clock import Clock, SystemClock

SECRET_KEY = re.compile(
    r"(token|secret|password|passwd|jit|private_key|authorization|api_key)", re.I
)
REDACTED = "[redacted]"


# Whether a key names a secret, remembered: log lines reuse a handful of keys, and the regex
# is most of a line's redaction cost. Bounded, in case some caller builds keys from data.
_secret_keys: dict[str, bool] = {}
_SECRET_KEYS_REMEMBERED = 4096


def _is_secret(key: str) -> bool:
    secret = SECRET_KEY.search(key) is not None
    if len(_secret_keys) < _SECRET_KEYS_REMEMBERED:
        _secret_keys[key] = secret
    return secret


def redact(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    known = _secret_keys
    for key in event:  # values are replaced, never keys added: iterating stays valid
        if known.get(key) is not False and _is_secret(key):
            event[key] = REDACTED
    return event


class UtcTimestamp:
    """Stamps ``timestamp`` in ISO 8601 UTC with microseconds: ``2026-11-30T12:00:00.123456Z``.

    What structlog's ``TimeStamper(fmt="iso")`` writes (but with the microseconds always
    shown), for a fraction of its cost: the date and time are formatted once a second, since
    every line of a busy server pays for its stamp and most lines share their second.
    """

    def __init__(self, clock: Clock | None = None) -> None:
        self._clock = clock or SystemClock()
        self._second: tuple[int, str] = (-1, "")  # replaced whole: threads may log at once

    def __call__(
        self, _: Any, __: str, event: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        now = self._clock.now()
        whole = int(now)
        second = self._second
        if second[0] != whole:
            second = (whole, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)))
            self._second = second
        event["timestamp"] = f"{second[1]}.{int((now - whole) * 1_000_000):06d}Z"
        return event


class _JsonDumps:
    """``json.dumps`` for structlog's JSONRenderer, with the encoder built once, not per line."""

    def __init__(self) -> None:
        self._encoder: json.JSONEncoder | None = None

    def __call__(self, value: Any, **dumps_kw: Any) -> str:
        if self._encoder is None:
            self._encoder = json.JSONEncoder(**dumps_kw)  # the renderer's kw never change
        return self._encoder.encode(value)


def configure(level: str = "info", fmt: str = "auto") -> None:
    numeric = getattr(logging, level.upper(), logging.INFO)
    json_out = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    renderer: Any = (
        structlog.processors.JSONRenderer(_JsonDumps())
        if json_out
        else structlog.dev.ConsoleRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            UtcTimestamp(),
            redact,
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        # One write and one flush per line (PrintLogger's print() writes the newline apart).
        logger_factory=structlog.WriteLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
