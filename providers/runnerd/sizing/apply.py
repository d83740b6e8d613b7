"""Writing sizing into runnerd.toml in place: apply advice, undo a change.

docs/admission.md, "Sizing" ("runnerctl sizing apply <profile> … goes through the same check as any
config, so a change MemoryMax cannot hold is refused") and "Auto sizing" ("the rest of the file
kept as written, comments included … runnerctl sizing undo <profile> writes the old values
back, cpus included").

:func:`edit_profile` is pure text in, text out (tomlkit keeps comments and layout);
:func:`check_text` runs runnerd's own config parser and budget check on the result; :func:`write`
records the change in the history first, then replaces the file atomically, then marks the
record done, so a crash between the two leaves a pending record that the next start settles.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import tomlkit
from tomlkit.items import Table

from rungar.errors import ConfigError
from rungar.model.units import format_bytes
from runnerd.config import RunnerdConfig, check_budget, parse_config
from runnerd.sizing.advise import ProfileAdvice
from runnerd.sizing.changes import DONE, Change, ChangeLog, Values, last_undoable


def values_of(config: RunnerdConfig, profile: str) -> Values:
    p = config.profiles[profile]
    return Values(p.memory, p.slots, p.cpus)


def edit_profile(text: str, profile: str, values: Values) -> str:
    """``text`` with the profile's memory, slots and cpus set, everything else as written."""
    doc = tomlkit.parse(text)
    profiles = doc.get("profiles")
    if not isinstance(profiles, Table) or profile not in profiles:
        raise ConfigError([f"no [profiles.{profile}] in the config"])
    table = profiles[profile]
    assert isinstance(table, Table)
    table["memory"] = format_bytes(values.memory)
    table["slots"] = values.slots
    cpus = values.cpus
    table["cpus"] = int(cpus) if float(cpus).is_integer() else cpus
    return tomlkit.dumps(doc)


def check_text(
    text: str, file: str, memory_max: int | None, slice_cpus: float | None
) -> RunnerdConfig:
    """The same check as any config: parse, then the budget against the slice."""
    config = parse_config(text, file)
    check_budget(config, memory_max, slice_cpus, text)
    return config


def write_atomically(path: Path, text: str) -> None:
    mode = path.stat().st_mode & 0o7777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write(
    path: Path,
    text: str,
    change: Change,
    log: ChangeLog,
    memory_max: int | None,
    slice_cpus: float | None,
    before_write: Callable[[Change], None] | None = None,
) -> tuple[Change, RunnerdConfig]:
    """Check, record, write, mark done. Raises ``ConfigError`` (nothing recorded or written)
    when the check refuses; a change the history cannot record is not written."""
    new_text = edit_profile(text, change.profile, change.new)
    config = check_text(new_text, str(path), memory_max, slice_cpus)
    recorded = log.record(change)
    if before_write is not None:
        before_write(recorded)  # tests kill here, between the record and the write
    write_atomically(path, new_text)
    log.mark(recorded.id, DONE)
    return replace(recorded, state=DONE), config


def apply_advice(
    path: Path,
    advice: ProfileAdvice,
    log: ChangeLog,
    memory_max: int | None,
    slice_cpus: float | None,
    now: float,
) -> Change:
    """``runnerctl sizing apply PROFILE``: write the advice's memory and slots."""
    if not advice.applicable or advice.new_memory is None or advice.new_slots is None:
        raise ConfigError([f"{advice.profile}: nothing to apply: {advice.line}"])
    text = path.read_text()
    current = values_of(parse_config(text, str(path)), advice.profile)
    new = Values(advice.new_memory, advice.new_slots, current.cpus)
    change = Change(
        profile=advice.profile,
        at=now,
        source="apply",
        kind=advice.action.value,
        reason=advice.line,
        old=current,
        new=new,
    )
    return write(path, text, change, log, memory_max, slice_cpus)[0]


def undo(
    path: Path,
    profile: str,
    log: ChangeLog,
    memory_max: int | None,
    slice_cpus: float | None,
    now: float,
) -> Change:
    """``runnerctl sizing undo PROFILE``: write back what the newest change replaced."""
    last = last_undoable(log.changes(profile))
    if last is None:
        raise ConfigError([f"{profile}: no sizing change to undo"])
    text = path.read_text()
    current = values_of(parse_config(text, str(path)), profile)
    change = Change(
        profile=profile,
        at=now,
        source="undo",
        kind="undo",
        reason=f"undid change {last.id}: {last.reason}",
        old=current,
        new=last.old,
        undoes=last.id,
    )
    return write(path, text, change, log, memory_max, slice_cpus)[0]
