"""A machine's last lines of output, as every provider hands them to Rungar (``LastOutput``)."""

from __future__ import annotations

DEFAULT_LINES = 20


def tail_lines(text: str | bytes, lines: int = DEFAULT_LINES) -> list[str]:
    """The last ``lines`` lines of ``text`` (bytes are decoded leniently), without line
    endings, oldest first; a trailing newline makes no empty last line."""
    if lines <= 0:
        return []
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = text.replace("\r\n", "\n").rstrip("\n")
    return [line.rstrip("\r") for line in text.split("\n")][-lines:] if text else []
