"""The effective configuration, as ``rungar config`` prints it: every default filled in, anchors
and merge keys resolved, each scale set's runner blocks laid over its providers', the shipped
plugin named for gcp and aws entries with neither address nor command, and secrets redacted.

Durations are text (``30s``, ``5m``) for people and seconds for ``--json``. Printed back out,
the scale_sets part is itself a valid scale_sets.yaml.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from rungar.config.model import HoldChoice, Overflow, ScaleSetConfig, ScaleSetsFile
from rungar.config.validate import seconds_text

REDACTED = "<redacted>"
# A key naming a secret value; keys naming where one is kept (``*_file``, ``*_path``,
# ``*_env``) are not secrets and stay.
_SECRET = re.compile(r"(secret|token|password|passphrase|private_key|credential|api_key)", re.I)
_WHERE = re.compile(r"_(file|path|env|dir)$")


def is_secret_key(key: str) -> bool:
    return bool(_SECRET.search(key)) and not _WHERE.search(key)


def redact(value: Any) -> Any:
    """``value`` with the text of every secret-named key replaced by ``<redacted>``. A number
    is never a secret (``message_queue_token_refresh_margin: 60`` is a duration): it stays."""
    if isinstance(value, Mapping):
        return {
            k: (REDACTED if is_secret_key(str(k)) and isinstance(v, str) and v else redact(v))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    return value


# Timing keys whose 0 means "the scale set's start_timeout": the value in force is each scale
# set's, shown per scale set (:func:`in_force`) instead of the 0.
PER_SCALE_SET = ("never_connected_grace", "disconnected_grace", "stuck_after")


def in_force(config: ScaleSetsFile, *, durations_as_text: bool = True) -> dict[str, Any]:
    """Per scale set, the value in force of each timing key whose default defers to the
    scale set (``PER_SCALE_SET``): the timing's when set, else its start_timeout."""
    return {
        s.name: {
            key: _duration(getattr(config.timing, key) or s.start_timeout, durations_as_text)
            for key in PER_SCALE_SET
        }
        for s in config.scale_sets
    }


def _duration(seconds: float | None, as_text: bool) -> Any:
    if seconds is None:
        return None
    return seconds_text(seconds) if as_text else seconds


def _set(entry: dict[str, Any]) -> dict[str, Any]:
    """Without the keys left unset (None), which the file would write by leaving them out."""
    return {k: v for k, v in entry.items() if v is not None}


def effective_scale_sets(
    config: ScaleSetsFile, *, durations_as_text: bool = True, shipped: Any = None
) -> dict[str, Any]:
    """``config`` as a plain mapping with every default; ``shipped(type)`` names the command a
    gcp or aws entry without address or command starts (None: left empty)."""
    text = durations_as_text
    # Every timing field is a duration but crash_backoff_after, a count of failures in a row.
    timing = {
        f.name: value if isinstance(value, int) else _duration(value, text)
        for f in dataclasses.fields(config.timing)
        for value in [getattr(config.timing, f.name)]
    }
    timing["hold"] = _duration(config.timing.hold_duration, text)
    providers = []
    for p in config.providers:
        command = list(p.command)
        if not command and not p.address and shipped is not None:
            command = list(shipped(p.type) or [])
        entry: dict[str, Any] = {
            "name": p.name,
            "type": p.type,
            "weight": p.weight,
            "max_runners": p.max_runners or None,
            "disabled": p.disabled,
            "price_per_hour": p.price_per_hour,
        }
        if p.overflow_after:
            entry["overflow_after"] = p.overflow_after
        if p.overflow is not Overflow.AT_ONCE:
            entry["overflow"] = p.overflow.value
            entry["overflow_margin"] = p.overflow_margin
            entry["typical_start"] = p.typical_start
        if p.address:
            entry["address"] = p.address
        if command:
            entry["command"] = command
        entry["timeout"] = _duration(p.timeout or config.timing.provider_timeout, text)
        entry["runner"] = dict(p.runner)
        entry.update(p.options)
        providers.append(redact(_set(entry)))
    scale_sets = []
    for s in config.scale_sets:
        scale_sets.append(
            _set(
                {
                    "name": s.name,
                    "labels": list(s.labels) or [s.name],
                    "runner_group": s.runner_group,
                    "max_runners": s.max_runners,
                    "min_runners": s.min_runners,
                    "priority": s.priority,
                    **_hold(s, text),
                    "placement": s.placement.value,
                    "start_timeout": _duration(s.start_timeout, text),
                    "max_idle_age": _duration(s.max_idle_age, text),
                    "max_age": _duration(s.max_age, text),
                    "paused": s.paused,
                    "providers": [
                        {"name": sp.name, "runner": redact(dict(sp.runner))} for sp in s.providers
                    ],
                }
            )
        )
    document: dict[str, Any] = {
        "version": 1,
        "timing": timing,
        "providers": providers,
        "scale_sets": scale_sets,
    }
    if config.dashboard.listen:
        document["dashboard"] = _dashboard(config, text)
    document["usage"] = {"retention": _duration(config.usage_retention, text)}
    return document


def _hold(s: ScaleSetConfig, text: bool) -> dict[str, Any]:
    """A hold other than the default's, and its margin; nothing for every_full."""
    if s.hold is HoldChoice.EVERY_FULL:
        return {}
    return {"hold": s.hold.value, "hold_margin": _duration(s.hold_margin, text)}


def _dashboard(config: ScaleSetsFile, text: bool) -> dict[str, Any]:
    board = config.dashboard
    tls = {
        "cert_file": board.cert_file or None,
        "key_file": board.key_file or None,
        "client_ca_file": board.client_ca_file or None,
    }
    return _set(
        {
            "listen": board.listen,
            "tls": _set(tls) or None,
            "token_file": board.token_file or None,
            "refresh": _duration(board.refresh, text),
            "history": _duration(board.history, text),
            "max_connections": board.max_connections,
            "max_streams": board.max_streams,
        }
    )
