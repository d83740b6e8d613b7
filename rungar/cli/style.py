"""Colour on the terminal, and only there: ``--color never|auto|always`` and ``NO_COLOR``.

``auto`` (the default) colours a stream that is a terminal when ``NO_COLOR`` is unset or empty
(https://no-color.org); ``never`` and ``always`` say it outright. ``rungar --color MODE`` sets
it for every command, through ``RUNGAR_COLOR`` so that rich (the demo, live views) agrees.
"""

from __future__ import annotations

import os
from typing import TextIO

COLOR_ENV = "RUNGAR_COLOR"
MODES = ("never", "auto", "always")
_CODES = {"ok": "32", "warn": "33", "fail": "31", "bold": "1", "dim": "2"}


def mode() -> str:
    chosen = os.environ.get(COLOR_ENV, "auto")
    return chosen if chosen in MODES else "auto"


def use_color(stream: TextIO) -> bool:
    chosen = mode()
    if chosen != "auto":
        return chosen == "always"
    if os.environ.get("NO_COLOR"):
        return False
    return bool(getattr(stream, "isatty", lambda: False)())


def paint(text: str, style: str, stream: TextIO) -> str:
    """``text`` in ``style``'s colour when ``stream`` takes colour, else as it is."""
    code = _CODES.get(style)
    if code is None or not use_color(stream):
        return text
    return f"\033[{code}m{text}\033[0m"


def set_mode(chosen: str) -> None:
    """``--color``: for this process and what it starts; rich reads NO_COLOR/FORCE_COLOR."""
    os.environ[COLOR_ENV] = chosen
    if chosen == "never":
        os.environ["NO_COLOR"] = "1"
        os.environ.pop("FORCE_COLOR", None)
    elif chosen == "always":
        os.environ.pop("NO_COLOR", None)
        os.environ["FORCE_COLOR"] = "1"


# A status word's colour (docs/cli.md, "One word per state"): green when all is well, yellow
# for a state that passes or was asked for, red for one that needs a person.
STATUS_STYLES = {
    "LISTENING": "ok",
    "OK": "ok",
    "STARTING": "warn",
    "WAITING": "warn",
    "PAUSED": "warn",
    "HOLDING": "warn",
    "HELD": "warn",
    "DISABLED": "warn",
    "DRAINING": "warn",
    "LEFTOVER": "warn",
    "UNREACHABLE": "fail",
    "CRASH": "fail",
}


def paint_status(text: str, stream: TextIO) -> str:
    """A status cell (``HELD for big (priority 10), …``) with its word, the leading capitals,
    in the word's colour."""
    words = text.split(" ")
    style = STATUS_STYLES.get(words[0], "")
    if not style:
        return text
    n = 1
    while n < len(words) and words[n].isalpha() and words[n].isupper():
        n += 1
    capitals = " ".join(words[:n])
    return paint(capitals, style, stream) + text[len(capitals) :]
