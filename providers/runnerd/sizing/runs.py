"""Finished runs as sizing and ``runnerd simulate`` read them from the job history.

docs/admission.md, "Sizing" ("Run without a daemon, it reads the history database read-only … Where
it may not write, it reads the database file alone"). The schema is the one documented in
:mod:`runnerd.history`; this module only reads it, through its own read-only connection, so it works
with or without the daemon. Columns a later schema may add (``branch``, ``run_id``) are read when
present: the auto-sizing take-back rule needs them to tell workflow runs and branches apart.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from rungar.model.job_key import JobKey
from runnerd.admission.model import CANCELLED, SUCCESS, Run
from runnerd.wal import wal_holds_changes

DAY = 86400.0


@dataclass(frozen=True, slots=True)
class SizingRun:
    """One finished run of a known job, with what sizing and the replay need of it."""

    key: JobKey
    result: str
    peak: int
    cap: int
    cpus: float
    started_at: float
    finished_at: float
    queued_at: float | None = None
    avg_cpu: float | None = None
    met_cap: bool = False  # its own limit ran out of memory (memory.events.local oom)
    killed_for_memory: bool = False  # an oom kill while its own limit held
    slot_wait: float = 0.0  # seconds refused for a slot or the budget, host waits left out
    host_wait: float = 0.0
    reserved: int | None = None
    branch: str | None = None
    run_id: str | None = None
    slots: int | None = None  # its profile's slots when it ran; None: not recorded
    sock_throttled: int | None = None  # times its sockets were held during bad reclaim
    job_started_at: float | None = None  # when its runner took the job; None: not recorded
    scale_set: str = ""  # the Rungar scale set that asked for its runner

    @property
    def succeeded(self) -> bool:
        return self.result == SUCCESS

    @property
    def cancelled(self) -> bool:
        return self.result == CANCELLED

    @property
    def hit(self) -> bool:
        """It met its cap or was killed for memory: its job goes on its cap."""
        return self.met_cap or self.killed_for_memory

    @property
    def run_started_at(self) -> float:
        """When the job itself started: its runner's start for a run that did not record it."""
        return self.job_started_at if self.job_started_at is not None else self.started_at

    @property
    def arrived_at(self) -> float:
        """When its job was queued; a run without that record arrived when it started."""
        return self.queued_at if self.queued_at is not None else self.started_at

    def as_run(self, reserved: int | None = None) -> Run:
        """The admission engine's view of it, for predictions."""
        return Run(
            finished_at=self.finished_at,
            result=self.result,
            peak=self.peak,
            cap=self.cap,
            avg_cpu=self.avg_cpu,
            met_cap=self.met_cap,
            killed_for_memory=self.killed_for_memory,
            reserved=self.reserved if reserved is None else reserved,
        )


_COLUMNS = (
    "profile, repository, workflow, job_name, result, peak_memory, cap_memory, cap_cpus,"
    " started_at, finished_at, queued_at, avg_cpu, met_cap, killed_for_memory, slot_wait,"
    " host_wait, reserved_memory"
)


def _connect_read_only(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    db.execute("SELECT 1 FROM jobs LIMIT 1")
    return db


@contextmanager
def open_read_only(
    path: str | Path, on_stale: Callable[[str], None] | None = None
) -> Iterator[sqlite3.Connection]:
    """The history opened read-only; where the WAL files cannot be made, the file alone.

    Reading the file alone, it checks whether the ``-wal`` holds changes the file lacks, and
    if so tells ``on_stale`` in a sentence (runnerd doctor then skips its sizing check)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no job history here")
    try:
        db = _connect_read_only(path)
    except sqlite3.OperationalError:
        # A reader that may not create -shm next to a WAL database reads the file alone.
        db = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
        if on_stale is not None and wal_holds_changes(path):
            on_stale(
                f"{path}: read without the changes its -wal holds (this user may not write "
                "there); run as the user who runs the daemon to read them"
            )
    try:
        yield db
    finally:
        db.close()


def read_runs(db: sqlite3.Connection, since: float, until: float | None = None) -> list[SizingRun]:
    """Every finished run of a known job that finished in [since, until], oldest first."""
    present = {row[1] for row in db.execute("PRAGMA table_info(jobs)")}
    extra = [
        c
        for c in ("branch", "run_id", "slots", "sock_throttled", "job_started_at", "scale_set")
        if c in present
    ]
    columns = _COLUMNS + "".join(f", {c}" for c in extra)
    sql = (
        f"SELECT {columns} FROM jobs WHERE finished_at >= ? AND finished_at <= ?"  # noqa: S608
        " AND result IS NOT NULL AND repository IS NOT NULL ORDER BY finished_at"
    )
    rows = db.execute(sql, (since, until if until is not None else float("inf"))).fetchall()
    runs = []
    for r in rows:
        more = dict(zip(extra, r[17:], strict=True))
        runs.append(
            SizingRun(
                key=JobKey(r[0], r[1], r[2], r[3]),
                result=r[4],
                peak=int(r[5]),
                cap=int(r[6]),
                cpus=float(r[7]),
                started_at=float(r[8]),
                finished_at=float(r[9]),
                queued_at=None if r[10] is None else float(r[10]),
                avg_cpu=None if r[11] is None else float(r[11]),
                met_cap=bool(r[12]),
                killed_for_memory=bool(r[13]),
                slot_wait=float(r[14] or 0.0),
                host_wait=float(r[15] or 0.0),
                reserved=None if r[16] is None else int(r[16]),
                branch=_text(more.get("branch")),
                run_id=_text(more.get("run_id")),
                slots=None if more.get("slots") is None else int(str(more["slots"])),
                job_started_at=(
                    None
                    if more.get("job_started_at") is None
                    else float(str(more["job_started_at"]))
                ),
                sock_throttled=(
                    None if more.get("sock_throttled") is None else int(str(more["sock_throttled"]))
                ),
                scale_set=str(more.get("scale_set") or ""),
            )
        )
    return runs


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def by_profile(runs: Sequence[SizingRun]) -> dict[str, list[SizingRun]]:
    grouped: dict[str, list[SizingRun]] = {}
    for run in runs:
        grouped.setdefault(run.key.profile, []).append(run)
    return grouped


def by_job(runs: Sequence[SizingRun]) -> dict[JobKey, list[SizingRun]]:
    grouped: dict[JobKey, list[SizingRun]] = {}
    for run in runs:
        grouped.setdefault(run.key, []).append(run)
    return grouped
