"""runnerd's dashboard, its data and route layer without a browser: the budget bar's parts, the
utilization reading, the runners' timeline, the config editor's check and stale refusal, the
access and cross-site rules of its writes, and the ``dashboard_listen`` config check."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from runnerd.config import parse_config
from runnerd.dashboard import editor
from runnerd.dashboard.app import app, live_messages
from runnerd.dashboard.editor import Opened, Stale
from runnerd.dashboard.timeline import Timeline
from runnerd.dashboard.views import ProfileCapacity, budget_parts, utilization
from runnerd.sizing.changes import ChangeLog
from runnerd.sizing.report import sizing_report

from rungar.errors import ConfigError
from tests.unit.sizing_fixtures import light_history

G = 1024**3


# -- the budget bar ---------------------------------------------------------------------------


def parts(*args: Any) -> dict[str, int]:
    found = budget_parts(*args)
    return {p.key: p.bytes for p in found}


def test_the_budget_bar_parts_add_up_to_memory_max_with_the_host_holding_room() -> None:
    # 33G MemoryMax; the host leaves the slice 30G; two runners reserve 7G, one uses 2G.
    got = parts(33 * G, 0, [(7 * G, 2 * G), (7 * G, 0)], 30 * G)
    assert got == {
        "in_use": 2 * G,
        "reserved": 12 * G,
        "mirror": 0,
        "host": 3 * G,
        "free": 16 * G,
    }
    assert sum(got.values()) == 33 * G


def test_the_budget_bar_never_runs_past_memory_max_when_runners_and_host_overlap() -> None:
    # A runner using more than it reserved (measured) and a host leaving little room.
    got = parts(16 * G, 1 * G, [(4 * G, 9 * G), (4 * G, 1 * G)], 6 * G)
    assert sum(got.values()) == 16 * G
    assert got["in_use"] == 10 * G and got["reserved"] == 3 * G and got["free"] == 0


def test_without_memory_max_the_bar_is_what_the_host_leaves_the_slice() -> None:
    got = parts(None, 0, [(2 * G, 1 * G)], 40 * G)
    assert sum(got.values()) == 40 * G and got["host"] == 0 and got["free"] == 38 * G


# -- utilization ------------------------------------------------------------------------------

NODE = ProfileCapacity("node", slots=2, memory=8 * G, cpus=4.0)


def job(
    start: float, end: float | None, peak: float, cpu: float, runner: str = "r"
) -> dict[str, Any]:
    return {
        "profile": "node",
        "runner": runner,
        "started_at": start,
        "finished_at": end,
        "peak_memory": int(peak * G),
        "avg_cpu": cpu,
    }


def test_busy_slots_with_light_jobs_read_as_room_to_raise_slots() -> None:
    jobs = [job(0, 100, 1, 0.5), job(0, 100, 1, 0.5)]
    (found,) = utilization(jobs, [NODE], 0, 100, 4, now=100)
    assert found.concurrency == (1.0, 1.0, 1.0, 1.0)
    assert found.memory[0] == pytest.approx(2 / 16)
    assert "peak concurrency without high utilization" in found.reading
    assert found.reading.endswith("room to raise slots")


def test_heavy_jobs_on_free_slots_read_as_lower_slots() -> None:
    jobs = [job(0, 100, 15.5, 1.0)]  # one job takes nearly both slots' memory
    (found,) = utilization(jobs, [NODE], 0, 100, 2, now=100)
    assert max(found.concurrency) == 0.5
    assert "peak utilization without high concurrency" in found.reading
    assert "lower slots" in found.reading


def test_a_job_counts_for_the_share_of_a_bucket_it_ran_and_a_running_one_until_now() -> None:
    running = {**job(50, None, 0, 0.0, runner="live"), "job_started_at": 50.0}
    jobs = [job(25, 75, 4, 2.0), running]
    (found,) = utilization(jobs, [NODE], 0, 100, 2, now=100, live_memory={"live": 8 * G})
    assert found.concurrency == pytest.approx((0.25, 0.75))
    # second bucket: half of the 4G job and all of the live runner's 8G, over 2 × 8G
    assert found.memory[1] == pytest.approx((0.5 * 4 + 8) / 16)


def test_short_jobs_that_fill_every_slot_read_as_full_though_no_bucket_mean_is() -> None:
    # Two 20 s jobs side by side in a 50 s bucket: both slots were busy, at a quarter of memory.
    jobs = [job(10, 30, 1, 0.2), job(12, 32, 1, 0.2, runner="r2")]
    (found,) = utilization(jobs, [NODE], 0, 100, 2, now=100)
    assert max(found.concurrency) < 0.95
    assert "every slot was busy" in found.reading and "room to raise slots" in found.reading


def test_a_reserve_runners_wait_for_its_job_is_not_busy_time() -> None:
    # Its runner started at 0 and waited; its job was queued at 50 and ran to 100.
    jobs = [{**job(0, 100, 1, 0.5), "queued_at": 50.0}]
    (found,) = utilization(jobs, [NODE], 0, 100, 2, now=100)
    assert found.concurrency == pytest.approx((0.0, 0.5))


def test_a_reserve_runner_still_waiting_for_a_job_occupies_its_slot_but_is_not_busy() -> None:
    # One job ran 0-20 s; the reserve runner started at 0 and waits with no job at 100.
    jobs = [job(0, 20, 1, 0.5), {**job(0, None, 0, 0.0, runner="reserve"), "queued_at": None}]
    (found,) = utilization(jobs, [NODE], 0, 100, 2, now=100)
    assert (found.busy, found.occupied) == pytest.approx((20 / 200, 120 / 200))
    assert max(found.concurrency) == pytest.approx(0.5 * 20 / 50)


def test_sizing_and_utilization_give_the_same_busy_share_for_the_same_profile_and_span() -> None:
    from runnerd.sizing.advise import slot_pressure
    from runnerd.sizing.runs import SizingRun

    from rungar.model.job_key import JobKey

    # The reserve runner of the measured case: it started at 0, its job queued at 24 and ran
    # from 25 to 44; a second runner took a job queued at 60 from 60 to 80, and a third one a
    # job cancelled from 85 to 90, which held its slot all the same. Two slots, 100 s.
    rows = [
        {**job(0, 44, 1, 0.5), "queued_at": 24.0, "job_started_at": 25.0, "slots": 2},
        {**job(60, 80, 1, 0.5, runner="r2"), "queued_at": 60.0, "job_started_at": 60.0},
        {**job(85, 90, 1, 0.5, runner="r3"), "queued_at": 85.0, "job_started_at": 85.0},
    ]
    (found,) = utilization(rows, [NODE], 0, 100, 4, now=100)
    key = JobKey("node", "octo/app", "ci", "build")
    runs = [
        SizingRun(key, "cancelled" if r["runner"] == "r3" else "succeeded", G, 8 * G, 4.0,
                  float(r["started_at"]),
                  float(r["finished_at"]), r["queued_at"], slots=r.get("slots"),
                  job_started_at=r["job_started_at"])
        for r in rows
    ]  # fmt: skip
    _, busy = slot_pressure(runs, NODE.slots, now=100)
    assert busy == found.busy == pytest.approx((20 + 20 + 5) / 200)
    assert found.occupied == pytest.approx((44 + 20 + 5) / 200)


def test_a_past_job_counts_against_the_slots_its_profile_had_then() -> None:
    # Run when node had 4 slots: one job was a quarter of them, not half of today's 2.
    jobs = [{**job(0, 100, 1, 0.5), "slots": 4}]
    (found,) = utilization(jobs, [NODE], 0, 100, 2, now=100)
    assert found.concurrency == pytest.approx((0.25, 0.25))


# -- the timeline -----------------------------------------------------------------------------


@dataclass
class State:
    name: str
    used: int = 0
    used_at: float = 0.0
    cpu_seconds: float = 0.0
    cpu_at: float = 0.0
    cpu_rate: float | None = None
    ended_at: float | None = None


def test_the_timeline_keeps_one_point_per_sample_with_the_providers_cpu_rate() -> None:
    timeline = Timeline(points=4)
    state = State("r1")
    for t, rate in ((1, None), (2, 1.5), (3, 0.25)):
        state.used, state.used_at, state.cpu_rate = t * G, t * 2.0, rate
        timeline.observe([state])
        timeline.observe([state])  # no new sample: no new point
    series = timeline.series("r1")
    assert series is not None
    assert series.times == [2.0, 4.0, 6.0] and series.cpu == [None, 1.5, 0.25]


def test_a_long_series_is_thinned_to_keep_the_whole_life_and_every_peak() -> None:
    timeline = Timeline(points=4)
    state = State("r1")
    for t, rate in ((1, 0.1), (2, 0.9), (3, 0.2), (4, 0.1), (5, 0.3)):
        state.used_at, state.cpu_rate, state.used = float(t), rate, t * G
        timeline.observe([state])
    series = timeline.series("r1")
    assert series is not None and series.times == [1.0, 3.0, 5.0]
    assert series.cpu == [0.9, 0.2, 0.3] and series.memory == [2 * G, 4 * G, 5 * G]
    assert timeline.recent("r1", since=3.0)["times"] == [3.0, 5.0]


def test_the_slice_series_keeps_its_last_points_and_one_per_look() -> None:
    timeline = Timeline(points=3)
    for t in range(1, 6):
        timeline.observe_slice(float(t), t * G, 0.5 * t, 2 * G, 1.0)
    timeline.observe_slice(5.0, 99 * G, None, 0, 0.0)  # the same look again: no new point
    recent = timeline.slice_recent(since=4.0)
    assert timeline.slice.times == [3.0, 4.0, 5.0]
    assert recent == {
        "times": [4.0, 5.0],
        "memory": [4 * G, 5 * G],
        "cpu": [2.0, 2.5],
        "reserved": [2 * G, 2 * G],
        "reserved_cpu": [1.0, 1.0],
    }


# -- the config editor ------------------------------------------------------------------------

CONFIG = """# the host
[host]
memory_max = "33G"
history = "{db}"

[profiles.node]
command = ["true"]
cpus = 8
memory = "7G"   # kept as written
slots = 2
"""


@pytest.fixture
def written(tmp_path: Path) -> tuple[Path, Path]:
    db = tmp_path / "history.db"
    light_history(db, now=time.time())
    path = tmp_path / "runnerd.toml"
    path.write_text(CONFIG.format(db=db))
    return path, db


def test_apply_opens_the_advice_in_the_editor_and_saving_records_it_as_apply_does(
    written: tuple[Path, Path],
) -> None:
    path, db = written
    config = parse_config(path.read_text(), str(path))
    (advice,) = sizing_report(config, db, 33 * G, time.time()).advice
    opened = editor.open_with_advice(path, advice)
    assert 'memory = "3G"' in opened.text and "# the host" in opened.text
    assert path.read_text() == CONFIG.format(db=db)  # opening writes nothing
    change = editor.save(path, opened.text, opened.version, db, time.time(), "node", advice)
    assert change is not None and change.source == "apply" and change.kind == "lower"
    assert 'memory = "3G"' in path.read_text()
    with ChangeLog(db, read_only=True) as log:
        (recorded,) = log.changes("node")
    assert (recorded.old.memory, recorded.new.memory, recorded.state) == (7 * G, 3 * G, "done")


def test_undo_opens_what_the_change_replaced_and_saving_records_it_as_undo_does(
    written: tuple[Path, Path],
) -> None:
    path, db = written
    config = parse_config(path.read_text(), str(path))
    (advice,) = sizing_report(config, db, 33 * G, time.time()).advice
    applied = editor.open_with_advice(path, advice)
    first = editor.save(path, applied.text, applied.version, db, time.time(), "node", advice)
    assert first is not None
    opened = editor.open_with_undo(path, first)
    assert opened.undo and 'memory = "7G"' in opened.text and "undo change" in opened.note
    undo = editor.save(path, opened.text, opened.version, db, time.time(), "node", None, first)
    assert undo is not None and (undo.source, undo.kind, undo.undoes) == ("undo", "undo", first.id)
    assert 'memory = "7G"' in path.read_text() and "# kept as written" in path.read_text()


def test_a_save_over_a_file_changed_since_it_was_opened_is_refused(
    written: tuple[Path, Path],
) -> None:
    path, db = written
    opened = editor.open_file(path)
    path.write_text(path.read_text().replace("slots = 2", "slots = 1"))  # an edit on disk
    with pytest.raises(Stale, match="changed since this editor opened it"):
        editor.save(path, opened.text.replace("slots = 2", "slots = 3"), opened.version, db, 0.0)
    assert "slots = 1" in path.read_text()


def test_a_save_the_check_refuses_names_file_line_and_key_and_writes_nothing(
    written: tuple[Path, Path],
) -> None:
    path, db = written
    opened = editor.open_file(path)
    too_big = opened.text.replace("slots = 2", "slots = 9")
    with pytest.raises(ConfigError) as refused:
        editor.save(path, too_big, opened.version, db, 0.0)
    assert refused.value.problems[0].startswith(f"{path}:2:1: profiles: slots × memory")
    assert "slots = 2" in path.read_text()


# -- routes: access and cross-site writes ------------------------------------------------------


class FakeSource:
    sample_interval = 0.01
    stream_for = 0.0

    def __init__(self) -> None:
        self.saved: list[tuple[str, str, str]] = []
        self.stale = False
        self.span: float | None = None  # seconds since the first job, as data_span answers
        self.known = {"42"}  # the job ids the history has

    async def overview(self) -> dict[str, Any]:
        return {"budget": "budget: 0 of 1G reserved (caps), 1G free", "runners": []}

    async def events_after(self, after: int) -> list[dict[str, Any]]:
        return [{"id": after + 1, "kind": "sizing.changed", "message": "m", "at": 1.0}]

    async def latest_event(self) -> int:
        return 0

    async def job(self, ident: str) -> dict[str, Any] | None:
        return {"record": {"job_id": ident}} if ident in self.known else None

    async def jobs(self, within: float) -> list[dict[str, Any]]:
        return [{"id": i, "conclusion": "succeeded"} for i in sorted(self.known)]

    async def data_span(self) -> float | None:
        return self.span

    async def utilization(self, window: float, buckets: int = 120) -> list[dict[str, Any]]:
        return []

    async def sizing(self) -> dict[str, Any]:
        return {}

    async def open_config(self, profile: str = "", undo: bool = False) -> Opened:
        return Opened("x = 1\n", "v1")

    async def save_config(self, text: str, version: str, profile: str, undo: bool = False) -> None:
        if self.stale:
            raise Stale("the file changed since this editor opened it")
        self.saved.append((text, version, profile))


@pytest.fixture
async def client() -> AsyncIterator[tuple[httpx.AsyncClient, FakeSource]]:
    source = FakeSource()
    transport = httpx.ASGITransport(app=app(source))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:7477") as c:
        yield c, source


BODY = {"text": "x = 2\n", "version": "v1", "profile": ""}


async def test_a_save_without_the_dashboard_header_is_refused_as_cross_site(
    client: tuple[httpx.AsyncClient, FakeSource],
) -> None:
    http, source = client
    answer = await http.post("/api/config", json=BODY)
    assert answer.status_code == 403 and "x-runnerd-dashboard" in answer.json()["error"]
    foreign = {"x-runnerd-dashboard": "1", "origin": "https://evil.example"}
    assert (await http.post("/api/config", json=BODY, headers=foreign)).status_code == 403
    assert source.saved == []
    own = {"x-runnerd-dashboard": "1", "origin": "http://127.0.0.1:7477"}
    assert (await http.post("/api/config", json=BODY, headers=own)).status_code == 200
    assert source.saved == [("x = 2\n", "v1", "")]


async def test_a_stale_save_is_answered_409_with_why(
    client: tuple[httpx.AsyncClient, FakeSource],
) -> None:
    http, source = client
    source.stale = True
    answer = await http.post("/api/config", json=BODY, headers={"x-runnerd-dashboard": "1"})
    assert answer.status_code == 409 and "changed since" in answer.json()["error"]


async def test_with_a_token_every_page_and_write_needs_it_and_a_cookie_carries_it() -> None:
    source = FakeSource()
    transport = httpx.ASGITransport(app=app(source, token="s3cret"))
    async with httpx.AsyncClient(transport=transport, base_url="https://h:7477") as http:
        assert (await http.get("/")).status_code == 401
        assert (await http.get("/api/status")).status_code == 401
        write = {"x-runnerd-dashboard": "1"}
        assert (await http.post("/api/config", json=BODY, headers=write)).status_code == 401
        bearer = {"authorization": "Bearer s3cret"}
        assert (await http.get("/api/status", headers=bearer)).status_code == 200
        login = await http.get("/sizing?token=s3cret")
        assert login.status_code == 303 and login.headers["location"] == "/sizing"
        assert "httponly" in login.headers["set-cookie"].lower()
        assert (await http.get("/api/status")).status_code == 200  # the cookie now
        assert (await http.post("/api/config", json=BODY, headers=write)).status_code == 200


async def test_the_pages_are_served_with_the_vendored_charting_library(
    client: tuple[httpx.AsyncClient, FakeSource],
) -> None:
    http, _ = client
    for path in ("/", "/sizing", "/utilization", "/jobs", "/jobs/42", "/config?profile=node"):
        page = await http.get(path)
        assert page.status_code == 200 and "/static/uPlot.iife.min.js" in page.text, path
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert (await http.get("/static/uPlot.iife.min.js")).status_code == 200
    assert (await http.get("/static/../config.py")).status_code == 404


async def test_the_live_stream_sends_the_overview_then_each_event_with_its_id() -> None:
    messages = [m async for m in live_messages(FakeSource(), after=4)]
    assert messages[0] == b"retry: 1000\n\n"
    assert messages[1].startswith(b"event: status\ndata: {")
    assert messages[2].startswith(b"id: 5\nevent: runnerd\n")


# -- the config check -------------------------------------------------------------------------


def test_dashboard_listen_beyond_loopback_without_tls_is_refused_naming_the_key() -> None:
    with pytest.raises(ConfigError) as e:
        parse_config('[host]\ndashboard_listen = "0.0.0.0:7477"\n')
    assert e.value.problems == [
        "runnerd.toml:2:1: host.dashboard_listen: beyond loopback needs tls_cert and tls_key, "
        "as listen does (then tls_ca or token_file decides who may read it)"
    ]
    assert parse_config('[host]\ndashboard_listen = "127.0.0.1:7477"\n').host.dashboard_listen


def test_dashboard_listen_beyond_loopback_needs_a_client_ca_or_a_token_too() -> None:
    tls = 'tls_cert = "c.pem"\ntls_key = "k.pem"\n'
    with pytest.raises(ConfigError) as e:
        parse_config(f'[host]\ndashboard_listen = "0.0.0.0:7477"\n{tls}')
    assert "host.dashboard_listen: beyond loopback needs tls_ca" in e.value.problems[0]
    assert parse_config(f'[host]\ndashboard_listen = "0.0.0.0:7477"\n{tls}token_file = "t"\n')


# -- the queue, as the local API's status says it ------------------------------------------------


async def test_status_lists_a_refused_scale_set_in_the_queue_with_the_refusal_sentence(
    tmp_path: Path,
) -> None:
    from runnerd.admission.model import HostReading, SliceReading
    from runnerd.api import status
    from runnerd.history import History
    from runnerd.provider import RunnerdProvider

    from rungar.model.machine import Refusal
    from rungar.testing.clock import FakeClock
    from tests.unit.test_runnerd_provider import CONFIG as PROVIDER_CONFIG
    from tests.unit.test_runnerd_provider import FakeRuntime, request

    clock = FakeClock()
    history = History(tmp_path / "history.db")
    text = PROVIDER_CONFIG.replace("[host]", f'[host]\nstate_dir = "{tmp_path}"')
    provider = RunnerdProvider(
        parse_config(text), FakeRuntime(), history, clock, 33 * G, 32.0, host_memory=64 * G
    )
    provider.readings.slice = SliceReading(clock.now(), 0)
    provider.readings.host = HostReading(clock.now(), 64 * G, 60 * G, 0.0, 0)
    try:
        for name in ("j1", "j2"):  # jvm has 2 slots
            await provider.create(request(name, "jvm"))
        assert status(provider)["queue"] == []
        refused = await provider.create(request("j3", "jvm"))
        assert isinstance(refused, Refusal)
        (waiting,) = status(provider)["queue"]
        assert waiting == {
            "scale_set": "jvm",
            "since": clock.now(),
            "kind": "slots",
            "waits_for": "a slot",
            "why": refused.message,
        }
    finally:
        history.close()


async def test_a_utilization_window_past_the_history_or_not_a_duration_is_refused(
    client: tuple[httpx.AsyncClient, FakeSource],
) -> None:
    http, _ = client
    assert (await http.get("/api/utilization?window=31d")).status_code == 400
    assert "window" in (await http.get("/api/utilization?window=soon")).json()["error"]
    assert (await http.get("/api/utilization?window=7d")).json() == {
        "window": 7 * 86400.0,
        "window_text": "7d",
        "profiles": [],
    }


@pytest.mark.parametrize(
    ("span", "window"),
    [(None, "1h"), (300.0, "1h"), (3 * 3600.0, "6h"), (20 * 3600.0, "24h"), (3 * 86400.0, "7d"),
     (25 * 3600.0, "24h"), (30 * 3600.0, "7d"), (20 * 86400.0, "30d")],
)  # fmt: skip
async def test_the_first_utilization_window_is_the_shortest_that_holds_every_job(
    client: tuple[httpx.AsyncClient, FakeSource], span: float | None, window: str
) -> None:
    http, source = client
    source.span = span
    found = (await http.get("/api/utilization")).json()
    assert found["window_text"] == window


async def test_a_job_the_history_does_not_have_is_a_404_page_linking_the_jobs_list(
    client: tuple[httpx.AsyncClient, FakeSource],
) -> None:
    http, _ = client
    missing = await http.get("/jobs/does-not-exist")
    assert missing.status_code == 404
    assert "No job does-not-exist" in missing.text and 'href="/jobs"' in missing.text
    assert (await http.get("/jobs/42")).status_code == 200


async def test_the_jobs_page_lists_finished_jobs_and_the_nav_links_it(
    client: tuple[httpx.AsyncClient, FakeSource],
) -> None:
    http, _ = client
    page = await http.get("/jobs")
    assert page.status_code == 200 and 'id="jobs"' in page.text
    assert '<a href="/jobs"' in (await http.get("/")).text
    assert (await http.get("/api/jobs")).json()["jobs"] == [{"id": "42", "conclusion": "succeeded"}]


def test_runnerctl_dashboard_prints_the_login_link_or_says_there_is_no_dashboard(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from runnerd.ctl import main as runnerctl
    from runnerd.dashboard.server import login_token

    path = tmp_path / "runnerd.toml"
    path.write_text(f'[host]\nstate_dir = "{tmp_path}"\n')
    assert runnerctl(["-c", str(path), "dashboard"]) == 1
    assert "no dashboard: set [host] dashboard_listen" in capsys.readouterr().out
    path.write_text(f'[host]\nstate_dir = "{tmp_path}"\ndashboard_listen = "127.0.0.1:7477"\n')
    assert runnerctl(["-c", str(path), "dashboard"]) == 1  # runnerd has not made its token yet
    assert "cannot read the dashboard's token" in capsys.readouterr().err
    token = login_token(parse_config(path.read_text(), str(path)).host)
    assert runnerctl(["-c", str(path), "dashboard"]) == 0
    assert capsys.readouterr().out == f"http://127.0.0.1:7477/?token={token}\n"
