"""The job id a test gets from the GitHub emulator is the one its provider receives: queued with
``POST /_fake/jobs``, it comes back as the ``job_id`` of the hints in ``rungar serve``'s
``Create`` call, as docs/github-emulator.md says."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

from rungar.model.machine import Created, CreateRequest, Refusal
from rungar.testing.fake_provider import GIB, FakeProvider
from tests.e2e.daemon_world import DaemonWorld
from tests.waiting import WAIT


class HintRecorder(FakeProvider):
    """Remembers the job ids of every create's hints."""

    hinted: list[str]

    async def create(self, request: CreateRequest) -> Created | Refusal:
        self.hinted = [*getattr(self, "hinted", []), *(h.job_id for h in request.job_hints)]
        return await super().create(request)


async def test_the_job_id_in_a_creates_hints_is_the_emulators_job_id() -> None:
    root = Path(tempfile.mkdtemp(prefix="rg-", dir="/tmp"))
    provider = HintRecorder("host", vcpus=8, memory_bytes=8 * GIB)
    world = DaemonWorld(root, {"host": provider})
    try:
        await world.start(
            {
                "version": 1,
                "providers": [{"name": "host", "type": "runnerd", "runner": {"vcpus": 1}}],
                "scale_sets": [
                    {"name": "linux", "labels": ["linux"], "max_runners": 1, "providers": ["host"]}
                ],
            }
        )
        job = await world.queue_job(labels=["linux"], duration=1)  # assigned once it listens
        loop = asyncio.get_running_loop()
        end = loop.time() + WAIT
        while job["jobId"] not in getattr(provider, "hinted", []):
            assert loop.time() < end, f"no create hinted {job['jobId']}"
            await asyncio.sleep(0.1)
    finally:
        await world.stop()
        shutil.rmtree(root, ignore_errors=True)
