"""structlog, configured once per entry point: JSON when not a TTY, text otherwise, to stderr.

A redaction processor blanks every value whose key looks like a secret (token, key, JIT config,
password, secret, authorization), whatever the caller passed: a secret never reaches a log.

Every entry point configures logging here (``rungar``, ``runnerd``, the cloud plugins), and the
standard library's loggers (uvicorn, asyncio, grpc's Python side, warnings) are routed through
the same pipeline, so with JSON configured every line is JSON and every line is redacted. In
every line's text values too (a library's message, a traceback, a value built from an answer),
anything that looks like a credential (a GitHub token of any format, a JWT, an authorization
header, a long base64 or base64url run such as a JIT config) is blanked as well.
gRPC's C core writes to stderr by itself, past Python's logging; with JSON configured it is
told to keep quiet (``GRPC_VERBOSITY=NONE``) unless ``GRPC_VERBOSITY`` is set, since its lines
cannot be made JSON. runnerd does not do this: its runners inherit its environment, and a CI
job's own gRPC logs are the job's business.
"""

from __future__ import annotations

import json
import logging
import os
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
# Credentials recognised by their look, for text written by other libraries (SECURITY.md,
# "Secrets in logs"):
# - GitHub's tokens by prefix: classic and installation tokens (``ghp_``, ``gho_``, ``ghu_``,
#   ``ghs_``, ``ghr_``), the stateless installation tokens GitHub issues since 2026
#   (``ghs_<app id>_<JWT>``: base64url, so ``-``, ``_`` and two dots), fine-grained PATs;
# - any JWT (an App's, a scale set's admin or message-queue token): base64url JSON header and
#   payload, ``eyJ`` each, and a signature;
# - an authorization header's value, whatever its scheme;
# - long base64 and base64url runs (a JIT config is 1-2 KiB of base64).
SECRET_VALUE = re.compile(
    r"(gh[pousr]_[A-Za-z0-9._-]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"
    r"|(?i:bearer|basic)\s+[^\s\"',]+"
    r"|(?i:authorization)[\"']?\s*[:=]\s*[\"']?[^\s\"',]+(?:\s+[^\s\"',]+)?"
    r"|[A-Za-z0-9+/]{120,}={0,2}|[A-Za-z0-9_-]{120,})"
)


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


def redact_text(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Blank credentials found in any text value (library messages, rendered tracebacks)."""
    for key, value in event.items():
        if isinstance(value, str) and SECRET_VALUE.search(value):
            event[key] = SECRET_VALUE.sub(REDACTED, value)
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


class _Stderr:
    """Whatever ``sys.stderr`` is when a line is written, not when logging was configured: a
    caller that swaps it (a test capturing output, a daemonising wrapper) is followed."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


_STDERR: Any = _Stderr()


def configure(
    level: str = "info", fmt: str = "auto", stream: Any = None, *, quiet_grpc_core: bool = True
) -> None:
    """Configure structlog and the standard library's logging for this process, writing to
    ``stream`` (default: whatever ``sys.stderr`` is at each line)."""
    out = stream if stream is not None else _STDERR
    numeric = getattr(logging, level.upper(), logging.INFO)
    json_out = fmt == "json" or (fmt == "auto" and not (stream or sys.stderr).isatty())
    renderer: Any = (
        structlog.processors.JSONRenderer(_JsonDumps())
        if json_out
        else structlog.dev.ConsoleRenderer()
    )
    timestamp = UtcTimestamp()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            timestamp,
            redact,
            structlog.processors.format_exc_info,
            # A value built from an answer or an exception's text (a traceback) can carry a
            # credential under an innocent key: about 6 µs a line.
            redact_text,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        # One write and one flush per line (PrintLogger's print() writes the newline apart).
        logger_factory=structlog.WriteLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )
    _route_stdlib(numeric, renderer, timestamp, out)
    if json_out and quiet_grpc_core:
        os.environ.setdefault("GRPC_VERBOSITY", "NONE")


def _route_stdlib(level: int, renderer: Any, timestamp: UtcTimestamp, out: Any) -> None:
    handler = logging.StreamHandler(out)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[
                structlog.stdlib.add_log_level,
                structlog.stdlib.add_logger_name,
                timestamp,
                redact,
            ],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                redact_text,
                renderer,
            ],
        )
    )
    handler._rungar = True  # type: ignore[attr-defined]  # marks ours, to replace it next time
    root = logging.getLogger()
    for old in list(root.handlers):
        # Ours from an earlier call, or a plain stream handler (logging.basicConfig's) that
        # would print each line a second time, not as JSON. Others (a test's capture) stay.
        if getattr(old, "_rungar", False) or type(old) is logging.StreamHandler:
            root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    # Each request's access line says nothing the metrics do not; a flood would flood the log.
    logging.getLogger("uvicorn.access").setLevel(max(level, logging.WARNING))
    # So is httpx's line for each request it sends (a burst's every JIT registration): the
    # GitHub client counts its calls by answer, and logs what goes wrong.
    logging.getLogger("httpx").setLevel(max(level, logging.WARNING))
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        named = logging.getLogger(name)
        named.handlers.clear()
        named.propagate = True
    logging.captureWarnings(True)
