"""What ``runnerctl tui`` reads and writes, the way the other runnerctl commands do.

Status and events come from runnerd's local API on its unix socket, the same ``GET /status`` and
``GET /events`` as ``runnerctl status`` and ``runnerctl events -f`` (:mod:`runnerd.api`), asked
asynchronously so that quitting cancels a long poll at once instead of waiting out its thread.
Sizing, the jobs and a job's record come from the config file and the job history read-only
(``runnerctl sizing``, ``runnerctl jobs``, ``runnerctl job ID``), so those screens work with or
without the daemon; ``a`` on the Sizing screen writes through
``runnerctl sizing apply``'s own function. Those block; the app runs them in a thread so the
screen keeps drawing. Nothing here imports Textual.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from runnerd.cli_jobs import job_entry
from runnerd.cli_sizing import apply_sizing
from runnerd.config import load_config

if TYPE_CHECKING:
    from runnerd.sizing.changes import Change
    from runnerd.sizing.report import SizingReport

Clock = Callable[[], float]  # epoch seconds: time.time, or a test's fixed time
STATUS_TIMEOUT = 5.0  # as runnerctl status waits for an answer
JOBS_WINDOW = 7 * 86400.0  # the Jobs screen lists the jobs recorded in the last 7 days
JOBS_SHOWN = 500  # the newest this many of them


class Unreachable(Exception):
    """runnerd does not answer on its socket; the message says where and how to start it."""


def unreachable_message(socket: str, config_path: str, error: str) -> str:
    return (
        f"runnerd does not answer on {socket} ({error}). "
        f"Start it with `runnerd serve -c {config_path}` "
        "(or `systemctl start runnerd` where it runs as a service), "
        "or point runnerctl at its socket with --socket."
    )


@dataclass(frozen=True, slots=True)
class Source:
    config_path: str
    socket: str

    async def _get(self, path: str, timeout: float, **params: float) -> Any:
        transport = httpx.AsyncHTTPTransport(uds=self.socket)
        try:
            async with httpx.AsyncClient(
                transport=transport, base_url="http://runnerd", timeout=timeout
            ) as client:
                response = await client.get(path, params=params)
                response.raise_for_status()
                return response.json()
        except httpx.HTTPError as e:
            reason = str(e) or type(e).__name__
            raise Unreachable(unreachable_message(self.socket, self.config_path, reason)) from e

    async def reload(self) -> list[str]:
        """``POST /reload``: runnerd runs with the config file as it is now, as after the
        dashboard's save; the problems that kept it on the old one, if any. Raises
        :class:`Unreachable` when runnerd does not answer."""
        transport = httpx.AsyncHTTPTransport(uds=self.socket)
        try:
            async with httpx.AsyncClient(
                transport=transport, base_url="http://runnerd", timeout=STATUS_TIMEOUT
            ) as client:
                response = await client.post("/reload")
                response.raise_for_status()
                answer = response.json()
        except httpx.HTTPError as e:
            reason = str(e) or type(e).__name__
            raise Unreachable(unreachable_message(self.socket, self.config_path, reason)) from e
        return [str(p) for p in answer.get("problems", [])]

    async def status(self) -> dict[str, Any]:
        """``GET /status``; raises :class:`Unreachable` when runnerd does not answer."""
        result: dict[str, Any] = await self._get("/status", STATUS_TIMEOUT)
        return result

    async def events(self, after: int, wait: float) -> list[dict[str, Any]]:
        """``GET /events``: the events after ``after``, waiting up to ``wait`` for one."""
        answer = await self._get("/events", wait + STATUS_TIMEOUT, after=after, wait=wait)
        events: list[dict[str, Any]] = answer["events"]
        return events

    def history_path(self) -> Path:
        return Path(load_config(self.config_path).host.history_path())

    def _history(self) -> Path:
        path = self.history_path()
        if not path.exists():
            raise FileNotFoundError(f"no job history at {path}")
        return path

    def sizing(self, now: float) -> SizingReport:
        """``runnerctl sizing``: the advice per profile from the config as it is on disk now."""
        from runnerd.provider import slice_limits
        from runnerd.sizing.report import sizing_report

        config = load_config(self.config_path)
        memory_max, cpus = slice_limits(config)
        path = Path(config.host.history_path())
        return sizing_report(config, path, memory_max, now, slice_cpus=cpus)

    def apply(self, profile: str, now: float) -> Change:
        """``runnerctl sizing apply PROFILE``; raises ``ConfigError`` when the check refuses."""
        return apply_sizing(Path(self.config_path), profile, now)

    def jobs(self, now: float) -> list[dict[str, Any]]:
        """``runnerctl jobs --since 7d``, newest first."""
        from runnerd.history import History

        path = self._history()
        history = History(path, read_only=True)
        try:
            rows = history.recorded_since(now - JOBS_WINDOW)
        finally:
            history.close()
        return [job_entry(row) for row in reversed(rows[-JOBS_SHOWN:])]

    def job(self, ident: str) -> dict[str, Any] | None:
        """``runnerctl job ID``: one job's record by GitHub job id or history row id."""
        from runnerd.history import History

        path = self._history()
        history = History(path, read_only=True)
        try:
            return history.job(ident)
        finally:
            history.close()
