"""The config editor: open runnerd.toml with its version, check an edit, save it unless stale.

The check is ``runnerd check-config``'s: runnerd's parser, then the budget against the slice
the edited file names (its MemoryMax and CPUs read again), every problem as ``FILE:LINE:COL:
key: what``. A save names the version it was opened at (a hash of the file's bytes); when the
file changed since (an auto sizing change, an edit on disk, another editor), it is refused as
:class:`Stale` and nothing is written. A save that changes a profile's memory, slots or cpus
after the Sizing page's apply is recorded as ``runnerctl sizing apply`` records it
(:func:`runnerd.sizing.apply.write`: recorded in the job history first, then written).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from rungar.errors import ConfigError
from runnerd.config import RunnerdConfig, check_budget, parse_config
from runnerd.provider import slice_limits
from runnerd.sizing.advise import ProfileAdvice
from runnerd.sizing.apply import edit_profile, values_of, write, write_atomically
from runnerd.sizing.changes import Change, ChangeLog, Values


class Stale(Exception):
    """The file changed since the editor opened it."""


@dataclass(frozen=True, slots=True)
class Opened:
    text: str  # what the editor shows: the file, or the file with the advice applied
    version: str  # the file's version as it was opened
    profile: str = ""  # the profile an apply or undo changes, "" for a plain edit
    note: str = ""  # what the advice says, or what the undo reverts, above the editor
    undo: bool = False  # the editor opened to undo the profile's newest sizing change


def version_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def open_file(path: Path) -> Opened:
    data = path.read_bytes()
    return Opened(data.decode(), version_of(data))


def open_with_advice(path: Path, advice: ProfileAdvice) -> Opened:
    """The file with ``advice``'s memory and slots in its profile, for the person to save."""
    data = path.read_bytes()
    text = data.decode()
    if not advice.applicable or advice.new_memory is None or advice.new_slots is None:
        raise ConfigError([f"{advice.profile}: nothing to apply: {advice.line}"])
    current = values_of(parse_config(text, str(path)), advice.profile)
    edited = edit_profile(
        text, advice.profile, Values(advice.new_memory, advice.new_slots, current.cpus)
    )
    return Opened(edited, version_of(data), advice.profile, advice.line)


def open_with_undo(path: Path, undone: Change) -> Opened:
    """The file with what ``undone`` replaced written back into its profile, cpus included
    (``runnerctl sizing undo``), for the person to save."""
    data = path.read_bytes()
    edited = edit_profile(data.decode(), undone.profile, undone.old)
    note = f"undo change {undone.id}: back to {undone.old.describe()} ({undone.describe()})"
    return Opened(edited, version_of(data), undone.profile, note, undo=True)


def check(text: str, path: Path) -> tuple[RunnerdConfig, int | None, float | None]:
    """``runnerd check-config`` on ``text`` as if it were ``path``; raises ``ConfigError``."""
    config = parse_config(text, str(path))
    memory_max, cpus = slice_limits(config)
    check_budget(config, memory_max, cpus, text)
    return config, memory_max, cpus


def _kind(old: Values, new: Values) -> str:
    if new.memory > old.memory:
        return "raise"
    if new.memory < old.memory:
        return "lower"
    return "slots" if new.slots != old.slots else "cpus"


def save(
    path: Path,
    text: str,
    opened_version: str,
    db: Path,
    now: float,
    profile: str = "",
    advice: ProfileAdvice | None = None,
    undone: Change | None = None,
) -> Change | None:
    """Write ``text`` to ``path`` when it passes the check and the file is as it was opened.

    Returns the sizing change recorded for ``profile`` (None for a plain edit, or when its
    values did not change): an undo of ``undone`` when the profile now has what it replaced,
    else an apply (of ``advice`` when the values are its). Raises :class:`Stale` or
    ``ConfigError``; then nothing is written.
    """
    current = path.read_bytes()
    if version_of(current) != opened_version:
        raise Stale(
            f"{path} changed since this editor opened it (by auto sizing, an edit on disk or "
            "another editor); nothing was saved."
        )
    config, memory_max, cpus = check(text, path)
    old_values: Values | None = None
    if profile and profile in config.profiles:
        try:
            old_values = values_of(parse_config(current.decode(), str(path)), profile)
        except (ConfigError, KeyError):
            old_values = None  # the file on disk does not parse: a plain edit
    new_values = values_of(config, profile) if old_values is not None else None
    if old_values is None or new_values is None or new_values == old_values:
        write_atomically(path, text)
        return None
    if undone is not None and new_values == undone.old:
        change = Change(
            profile=profile,
            at=now,
            source="undo",
            kind="undo",
            reason=f"undid change {undone.id}: {undone.reason}",
            old=old_values,
            new=new_values,
            undoes=undone.id,
        )
        with ChangeLog(db) as log:
            return write(path, text, change, log, memory_max, cpus)[0]
    as_advised = (
        advice is not None
        and advice.applicable
        and (new_values.memory, new_values.slots) == (advice.new_memory, advice.new_slots)
    )
    reason = "edited in the dashboard's config editor"
    if advice is not None:
        reason = advice.line if as_advised else f"{reason}, from the advice: {advice.line}"
    change = Change(
        profile=profile,
        at=now,
        source="apply",
        kind=advice.action.value
        if as_advised and advice is not None
        else _kind(old_values, new_values),
        reason=reason,
        old=old_values,
        new=new_values,
    )
    with ChangeLog(db) as log:
        return write(path, text, change, log, memory_max, cpus)[0]
