"""Bounds on what a provider answers, applied before anything is stored, logged, shown or sent
on (docs/architecture.md, "What Rungar believes of a provider"): every text field the provider
protocol documents is cut to a documented length, and the fields with a documented form are
checked against it.

Everything a provider answers is untrusted: a refusal whose ``resource`` is 200 KB must cost
1 KiB in each event it is written to, not 200 KB.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace

from rungar.model.machine import Refusal, RefusalKind

CUT = "…(cut)"  # ends a text that was cut
TEXT_MAX = 1024  # a sentence: a refusal's message, an error's details, a line of output
NAME_MAX = 255  # a machine's name (the runner's name), a provider's own name, kind, version
LABEL_MAX = 256  # a label's key or value
LABELS_MAX = 64  # labels on one machine
SIZE_MAX = 64  # a machine's size, "4 vCPU, 8G": a short text for display
LINES_MAX = 200  # lines of a runner's last output, problems of a runner block
# FULL's resource: "one lowercase word" ("memory", "cpu", "disk", "slots", "quota", "stock"),
# or a few joined by spaces as the cloud providers name theirs ("zone stock and quota").
RESOURCE = re.compile(r"[a-z][a-z0-9_-]*(?: [a-z][a-z0-9_-]*)*")
RESOURCE_MAX = 64
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def cut(text: str, limit: int = TEXT_MAX) -> str:
    """``text``, or its first characters and :data:`CUT` when it is longer than ``limit``."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - len(CUT))] + CUT


def sentence(text: str, limit: int = TEXT_MAX) -> str:
    """A text shown to people as one line: cut, control characters (newlines, escapes that
    would forge log lines or move a terminal's cursor) replaced by a space."""
    text = cut(text, limit)
    if text.isprintable():
        return text
    return _CONTROL.sub(" ", text)


def resource(word: str) -> str:
    """FULL's resource when it is lowercase words (one, or a few joined by spaces), at most
    :data:`RESOURCE_MAX` characters; else "" (not known)."""
    return word if len(word) <= RESOURCE_MAX and RESOURCE.fullmatch(word) else ""


def is_name(name: str) -> bool:
    """Whether ``name`` can be a machine's name: 1 to :data:`NAME_MAX` printable characters,
    no space, and not one cut short (:func:`cut`)."""
    return (
        0 < len(name) <= NAME_MAX
        and name.isprintable()
        and " " not in name
        and not name.endswith(CUT)
    )


def labels(pairs: dict[str, str]) -> dict[str, str]:
    """At most :data:`LABELS_MAX` labels, each key and value cut to :data:`LABEL_MAX`."""
    if len(pairs) <= LABELS_MAX and all(
        len(k) <= LABEL_MAX and len(v) <= LABEL_MAX for k, v in pairs.items()
    ):
        return pairs
    kept = list(pairs.items())[:LABELS_MAX]
    return {cut(k, LABEL_MAX): cut(v, LABEL_MAX) for k, v in kept}


ROOM_MAX = 86400.0  # a FULL refusal's expected room: at most a day from the answer


def room_expected(seconds: float, confidence: float) -> str:
    """Why a FULL refusal's expected room cannot be believed, or "" when it can: ``seconds``
    finite, 0 to :data:`ROOM_MAX`; ``confidence`` 0 to 1."""
    if not math.isfinite(seconds) or seconds < 0 or seconds > ROOM_MAX:
        return f"room expected in {seconds!r} s is not 0 to {ROOM_MAX:g} s: ignored"
    if not (0.0 <= confidence <= 1.0):  # NaN fails too
        return f"room expected with confidence {confidence!r}, not 0 to 1: ignored"
    return ""


def believed_room(refusal: Refusal) -> Refusal:
    """``refusal`` with its expected room kept only when it can be believed: a FULL refusal's,
    within :func:`room_expected`'s bounds; otherwise dropped, and ``room_ignored`` says why (a
    provider's answer is untrusted, in process or not)."""
    room = refusal.room
    if room is None:
        return refusal
    if refusal.kind is not RefusalKind.FULL:
        why = f"room expected on a {refusal.kind.value} refusal, not a full one: ignored"
    else:
        why = room_expected(room.seconds, room.confidence)
    return replace(refusal, room=None, room_ignored=why) if why else refusal
