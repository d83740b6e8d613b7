"""runnerd's Prometheus metrics: resource and concurrency utilization, admissions, refusals,
predictions' error, read from a fixture slice in the cgroup v2 format."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from runnerd.config import parse_config
from runnerd.history import History
from runnerd.metrics import parse_io_stat
from runnerd.provider import RunnerdProvider
from runnerd.runtime.base import SliceUsage, Usage
from runnerd.sampler import Sampler

from rungar.model.machine import Conclusion, Created, JobHint, Refusal, Removal
from rungar.model.runner import RemovalReason
from rungar.testing.clock import FakeClock
from tests.unit.test_runnerd_provider import CONFIG, FakeRuntime, G, request

COMPLETED = Removal(
    RemovalReason.JOB_COMPLETED, Conclusion.SUCCEEDED, JobHint("octo/app", "ci", "build", "1")
)


def samples(provider: RunnerdProvider) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(provider.metrics.text().decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


class SliceRuntime(FakeRuntime):
    """The fake runtime, with the slice's memory as the test sets it."""

    slice_memory = 0

    async def slice_usage(self) -> SliceUsage | None:
        return SliceUsage(self.slice_memory, self.slice_memory)


DASHBOARD = Path(__file__).parents[2] / "config" / "grafana" / "runnerd-utilization.json"


def test_io_stat_adds_up_every_devices_read_and_written_bytes() -> None:
    text = "8:0 rbytes=100 wbytes=20 rios=1 wios=1 dbytes=0 dios=0\n259:0 rbytes=5 wbytes=7\n"
    assert parse_io_stat(text) == (105, 27)


async def test_metrics_put_resource_and_concurrency_utilization_side_by_side(
    tmp_path: Path,
) -> None:
    slice_dir = tmp_path / "cgroup" / "runnerd.slice"
    slice_dir.mkdir(parents=True)
    (slice_dir / "cpu.stat").write_text("usage_usec 1000000\nuser_usec 0\n")
    (slice_dir / "io.stat").write_text("8:0 rbytes=4096 wbytes=8192 rios=1 wios=2\n")
    (slice_dir / "io.pressure").write_text(
        "some avg10=12.50 avg60=1.00 avg300=0.00 total=1\n"
        "full avg10=1.00 avg60=0.00 avg300=0.00 total=1\n"
    )
    proc = tmp_path / "proc"  # a 64G host with 60G available
    (proc / "pressure").mkdir(parents=True)
    (proc / "meminfo").write_text("MemTotal: 67108864 kB\nMemAvailable: 62914560 kB\n")
    (proc / "pressure" / "memory").write_text("some avg10=0.00\nfull avg10=0.00\n")
    roots = f'cgroup_root = "{slice_dir.parent}"\nproc_root = "{proc}"'
    text = CONFIG.replace("[host]", f'[host]\nstate_dir = "{tmp_path}"\n{roots}')
    config = parse_config(text)
    clock = FakeClock()
    runtime = SliceRuntime()
    history = History(tmp_path / "history.db")
    provider = RunnerdProvider(config, runtime, history, clock, 33 * G, 32.0, host_memory=64 * G)
    sampler = Sampler(provider, clock)
    try:
        await sampler.tick()
        for name in ("a", "b"):
            assert isinstance(await provider.create(request(name, scale_set="jvm")), Created)
        refused = await provider.create(request("c", scale_set="jvm"))
        assert isinstance(refused, Refusal) and refused.resource == "slots"
        await provider.update_runner("a", JobHint("octo/app", "ci", "build", "1"))
        runtime.usage["a"] = Usage(memory=7 * G, held=7 * G, cpu_seconds=1.0)
        runtime.slice_memory = int(16.5 * G)
        clock.set(clock.now() + 2)
        (slice_dir / "cpu.stat").write_text("usage_usec 17000000\n")  # 16 CPU-seconds in 2 s
        await sampler.tick()
        found = samples(provider)
        assert found[("runnerd_memory_utilization", ())] == 0.5
        assert found[("runnerd_cpu_utilization", ())] == 8 / 32  # 8 CPUs of the slice's 32
        assert found[("runnerd_io_utilization", ())] == 0.125
        assert found[("runnerd_slice_io_bytes_total", (("direction", "write"),))] == 8192
        assert found[("runnerd_concurrency_utilization", (("profile", "jvm"),))] == 1.0
        assert found[("runnerd_concurrency_utilization", (("profile", "node"),))] == 0.0
        # Of jvm's two runners, asked for no queued jobs, only the one that took a job is busy.
        assert found[("runnerd_busy_utilization", (("profile", "jvm"),))] == 0.5
        assert found[("runnerd_slots", (("profile", "jvm"),))] == 2
        policy = (("policy", "measured"), ("profile", "jvm"))
        assert found[("runnerd_admissions_total", policy)] == 2
        assert found[("runnerd_refusals_total", (("profile", "jvm"), ("resource", "slots")))] == 1
        # The job ends at a 7G peak against its 14G reservation: a ratio of 0.5.
        runtime.usage["a"] = Usage(memory=7 * G, held=0, cpu_seconds=2.0, exited=True, exit_code=0)
        clock.set(clock.now() + 2)
        await sampler.tick()
        # Recorded once Rungar removes it and says how its job ended.
        await provider.delete("a", COMPLETED)
        found = samples(provider)
        ratio = (("le", "0.5"), ("profile", "jvm"))
        assert found[("runnerd_prediction_ratio_bucket", ratio)] == 1
        assert found[("runnerd_prediction_ratio_bucket", (("le", "0.25"), ("profile", "jvm")))] == 0
    finally:
        history.close()


async def test_the_grafana_dashboard_loads_and_queries_only_metrics_runnerd_exports(
    tmp_path: Path,
) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    exprs.append(dashboard["templating"]["list"][1]["query"]["query"])
    named = {m for e in exprs for m in re.findall(r"\brunnerd_[a-z_]+", e)}
    # What a provider with a runner, a refusal, a finished job and a slice with io.stat exports.
    slice_dir = tmp_path / "cgroup" / "runnerd.slice"
    slice_dir.mkdir(parents=True)
    (slice_dir / "cpu.stat").write_text("usage_usec 1000000\n")
    (slice_dir / "io.stat").write_text("8:0 rbytes=1 wbytes=2\n")
    (slice_dir / "io.pressure").write_text("some avg10=1.00\nfull avg10=0.00\n")
    text = CONFIG.replace(
        "[host]", f'[host]\nstate_dir = "{tmp_path}"\ncgroup_root = "{slice_dir.parent}"'
    )
    history = History(tmp_path / "history.db")
    clock = FakeClock()
    runtime = SliceRuntime()
    provider = RunnerdProvider(parse_config(text), runtime, history, clock, 33 * G, 32.0)
    sampler = Sampler(provider, clock)
    try:
        await sampler.tick()
        await provider.create(request("a", scale_set="jvm"))
        await provider.create(request("b", scale_set="jvm"))
        await provider.create(request("c", scale_set="jvm"))
        await provider.update_runner("a", JobHint("octo/app", "ci", "build", "1"))
        runtime.usage["a"] = Usage(memory=G, held=0, cpu_seconds=1.0, exited=True, exit_code=0)
        clock.set(clock.now() + 2)
        await sampler.tick()
        await provider.delete("a", COMPLETED)
        exported = {
            family.name + suffix
            for family in text_string_to_metric_families(provider.metrics.text().decode())
            for suffix in ("", "_total", "_bucket")
        }
    finally:
        history.close()
    assert named and named <= exported, named - exported
    assert {p["title"] for p in dashboard["panels"] if p.get("repeat") == "instance"} == {
        "Utilization on $instance: resources and concurrency"
    }
