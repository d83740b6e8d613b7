"""``rungar usage`` through the real admin socket: the jobs kept in the state database, summed
as asked, printed as a table or JSON; a grouping the daemon does not know is a usage error."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rungar.cli.main import main
from rungar.daemon.control import Control
from rungar.rpc.admin_client import AdminClient, AdminError
from rungar.rpc.admin_server import AdminServer, serve_admin
from rungar.store.usage import UsageBook
from rungar.usage.summary import JobUsage
from tests.integration.test_admin_server import make_control

pytestmark = pytest.mark.usefixtures("quiet_logs")


def served_job(n: int, repository: str, provider: str, price: float | None) -> JobUsage:
    return JobUsage(
        job_id=str(n),
        finished_at=1_800_000_000.0,
        repository=repository,
        workflow=".github/workflows/ci.yml",
        job="build",
        scale_set="linux",
        provider=provider,
        runner=f"linux-{n}",
        runner_seconds=1800.0,
        conclusion="succeeded" if n % 2 else "failed",
        wait=4.0 * n,
        price_per_hour=price,
    )


@pytest.fixture
async def served(short_dir: Path) -> AsyncIterator[tuple[Control, AdminServer]]:
    control = make_control(short_dir)
    book = UsageBook(control.ctx.store)
    book.record(served_job(1, "octo/app", "cloud", 0.5), now=1_800_000_000.0)
    book.record(served_job(2, "octo/app", "host", None), now=1_800_000_000.0)
    book.record(served_job(3, "octo/web", "host", None), now=1_800_000_000.0)
    server = await serve_admin(control, str(short_dir / "rungar.sock"))
    yield control, server
    await server.stop(None)


async def test_the_usage_call_sums_the_kept_jobs_by_what_was_asked(
    served: tuple[Control, AdminServer],
) -> None:
    _, server = served
    async with AdminClient(server.path) as client:
        by_repository = await client.usage("repository", 0.0)
        by_provider = await client.usage("provider", 0.0)
        later = await client.usage("repository", 1_800_000_001.0)
        with pytest.raises(AdminError) as refused:
            await client.usage("colour", 0.0)
    assert [(g["key"], g["jobs"]) for g in by_repository["groups"]] == [
        ("octo/app", 2),
        ("octo/web", 1),
    ]
    assert by_repository["groups"][0]["conclusions"] == {"failed": 1, "succeeded": 1}
    assert {g["key"]: g["cost"] for g in by_provider["groups"]} == {"host": None, "cloud": 0.25}
    assert later["groups"] == []
    assert refused.value.code == "invalid_argument"


async def test_rungar_usage_prints_a_table_with_totals_and_json_on_request(
    served: tuple[Control, AdminServer], capsys: pytest.CaptureFixture[str]
) -> None:
    _, server = served
    base = ["usage", "--socket", server.path, "--since", "3650d"]
    assert await asyncio.to_thread(main, [*base, "--by", "provider"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0] == "Jobs served in the last 3650d, by provider"
    assert table[1].split() == [
        "PROVIDER", "JOBS", "SUCCEEDED", "FAILED", "OTHER", "RUNNER", "TIME", "WAIT", "P50",
        "WAIT", "P95", "COST",
    ]  # fmt: skip
    assert table[2].split() == ["host", "2", "1", "1", "0", "1h", "00m", "8.0s", "12.0s", "-"]
    assert table[3].split()[0] == "cloud" and table[3].split()[-1] == "0.25"
    assert table[4].split()[:2] == ["TOTAL", "3"]
    assert table[-1].startswith("RUNNER TIME and WAIT on Rungar's clock; WAIT: from GitHub")
    assert await asyncio.to_thread(main, [*base, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["by"] == "repository" and document["total"]["jobs"] == 3
    assert await asyncio.to_thread(main, [*base, "--since", "soon"]) == 2
