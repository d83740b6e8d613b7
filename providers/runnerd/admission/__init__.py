"""Admission, pure: admit or refuse a runner from readings, reservations and predictions.

docs/admission.md, "The host's memory", "Measured admission", "CPU admission". No I/O and no clock:
``now`` is an argument, so the daemon and ``runnerd simulate`` run the same decisions.
"""

from __future__ import annotations

from runnerd.admission.admit import counted_memory, cpu_line, decide, memory_reserved
from runnerd.admission.model import (
    AdmissionRecord,
    Admit,
    Candidate,
    Decided,
    GuardState,
    HostReading,
    Limits,
    NoRoom,
    Policy,
    Prediction,
    Run,
    Running,
    SliceReading,
)
from runnerd.admission.predict import PredictionRules, ProfileStats, predict, profile_stats

__all__ = [
    "AdmissionRecord",
    "Admit",
    "Candidate",
    "Decided",
    "GuardState",
    "HostReading",
    "Limits",
    "NoRoom",
    "Policy",
    "Prediction",
    "PredictionRules",
    "ProfileStats",
    "Run",
    "Running",
    "SliceReading",
    "counted_memory",
    "cpu_line",
    "decide",
    "memory_reserved",
    "predict",
    "profile_stats",
]
