"""The shape versions of the JSON documents scripts read (docs/json.md): a change that breaks a
reader raises the version, and the previous shape stays available for one minor release."""

from __future__ import annotations

STATUS_SHAPE = 2  # `rungar status --json`; shape 1 is printed with --shape 1
