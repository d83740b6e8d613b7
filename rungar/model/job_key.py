"""A job as runnerd's predictions know it (docs/admission.md): the key its history, predictor,
sizing and ``runnerd simulate`` group runs by. Plain data, so the pure code that groups by it
needs nothing of the history database that stores it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class JobKey:
    """A job as predictions know it: repository, workflow and job name, within a profile."""

    profile: str
    repository: str
    workflow: str
    job: str
