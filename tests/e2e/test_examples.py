"""Every numbered example under examples/: valid as written, and doing what its README says.

Each example's scale_sets.yaml is rendered the way the demo renders it and checked with
``rungar validate``; then it runs for real on loopback (GitHub emulator, runnerd processes,
moto's server, the GCE fake, the daemon) with a small burst of jobs, and the test checks that
every job finished and that the runners landed where the README says they do. Each run takes
10 to 30 seconds of wall clock: the default run runs the first example, ``make test-long`` all.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from string import Template

import pytest

from rungar.demo.cloudboot import GCE_JIT_KEY, GCE_MANAGED
from rungar.demo.examples import EXAMPLES, EXAMPLES_DIR, ExampleRun, run_example

BIN = Path(sys.executable).parent
NUMBERED = sorted(p.name for p in EXAMPLES_DIR.iterdir() if p.name[:2].isdigit())


def test_every_numbered_folder_is_an_example_with_a_readme() -> None:
    assert sorted(EXAMPLES) == NUMBERED
    for name in NUMBERED:
        readme = (EXAMPLES_DIR / name / "README.md").read_text()
        assert "What to expect" in readme, name
        assert f"python -m rungar.demo.examples {name}" in readme, name
        assert (EXAMPLES_DIR / name / "runnerd.toml").exists() == bool(EXAMPLES[name].hosts)


@pytest.mark.parametrize("name", NUMBERED)
def test_the_example_validates(name: str, tmp_path: Path) -> None:
    values = {
        "DIR": str(tmp_path),
        "BIN": str(BIN),
        "AMI": "ami-0123456789abcdef0",
        "SUBNET_1": "subnet-0123456789abcdef0",
        "SUBNET_2": "subnet-0fedcba9876543210",
    }
    text = Template((EXAMPLES_DIR / name / "scale_sets.yaml").read_text()).substitute(values)
    path = tmp_path / "scale_sets.yaml"
    path.write_text(text)
    done = subprocess.run(
        [str(BIN / "rungar"), "validate", str(path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{path} is valid: ")


def test_the_gcp_booter_reads_what_the_gcp_provider_writes() -> None:
    from rungar_gcp.labels import JIT_METADATA_KEY, labels_filter

    assert GCE_JIT_KEY == JIT_METADATA_KEY
    assert labels_filter({"rungar.sh/managed": "true"}) == GCE_MANAGED


async def run(name: str) -> ExampleRun:
    outcome = await run_example(EXAMPLES[name])
    summary = outcome.summary
    assert summary.ok, "\n".join(outcome.lines())
    assert "?" not in {p for _, p in outcome.job_providers}, "a job ran on an unknown runner"
    return outcome


@pytest.mark.long  # the runnerd learning test runs one host through the real stack in make test
@pytest.mark.timeout(90)
async def test_01_one_host_runs_every_job_and_refuses_past_its_slots() -> None:
    outcome = await run("01-single-host")
    assert outcome.providers_of("ci") == {"host1": 5}
    assert outcome.summary.refusals[("FULL", "slots")] >= 1
    (host,) = outcome.summary.learning  # runnerd recorded every job as GitHub concluded it
    assert (host.host, dict(host.conclusions)) == ("host1", {"succeeded": 5})


@pytest.mark.long
@pytest.mark.timeout(90)
async def test_02_a_full_host_is_held_for_the_large_size_until_it_has_room() -> None:
    outcome = await run("02-sizes-with-priority")
    large = outcome.providers_of("rungar-c8-m16")
    assert sum(large.values()) == 2 and set(large) <= {"compute1", "compute2"}
    assert set(outcome.providers_of("rungar-c2-m4")) == {"compute1", "compute2"}
    assert outcome.summary.refusals[("FULL", "memory")] >= 1
    assert any(h.endswith("for rungar-c8-m16") for h in outcome.summary.holds)


@pytest.mark.long
@pytest.mark.timeout(90)
async def test_03_the_hosts_fill_first_and_aws_takes_the_overflow() -> None:
    outcome = await run("03-hosts-then-cloud")
    ci = outcome.providers_of("ci")
    assert set(ci) == {"host1", "host2", "aws"}
    assert ci["host1"] >= 4 and ci["host2"] >= 4 and 1 <= ci["aws"] <= 4
    assert outcome.summary.refusals[("FULL", "slots")] >= 1
    machines = list(outcome.cloud_machines.values())
    assert len(machines) == ci["aws"] and not any(m.spot for m in machines)


@pytest.mark.long
@pytest.mark.timeout(90)
async def test_04_gcp_rotates_zones_and_a_zone_out_of_stock_passes_to_the_next() -> None:
    outcome = await run("04-gcp-zones-spot")
    assert outcome.providers_of("ci") == {"gcp": 6}
    machines = list(outcome.cloud_machines.values())
    assert len(machines) == 6 and all(m.spot for m in machines)
    zones = {m.place for m in machines}
    assert zones == {"us-central1-b", "us-central1-c"}, "rotation uses both zones in stock"
    refused = [where for _, where, out in outcome.gce_inserts if out]
    assert refused and all(w.startswith("us-central1-a/") for w in refused)
    for runner in {r for r, _, out in outcome.gce_inserts if out}:
        path = [where for r, where, _ in outcome.gce_inserts if r == runner]
        assert path[-1].startswith("us-central1-b/"), f"{runner} went {path}"
    assert not outcome.summary.refusals, "a zone out of stock is the provider's to pass over"


@pytest.mark.long
@pytest.mark.timeout(90)
async def test_05_spot_is_tried_first_and_on_demand_takes_what_spot_refuses() -> None:
    outcome = await run("05-aws-spot-fallback")
    ci = outcome.providers_of("ci")
    assert ci["aws-spot"] >= 2 and ci["aws-on-demand"] >= 1
    assert outcome.spot_refused >= 1
    full = sum(n for (kind, _), n in outcome.summary.refusals.items() if kind == "FULL")
    assert full >= 1, "the spot provider refused FULL and the runner went on to on-demand"
    spot = [m for m in outcome.cloud_machines.values() if m.spot]
    on_demand = [m for m in outcome.cloud_machines.values() if not m.spot]
    assert len(spot) == outcome.summary.runners_by_provider["aws-spot"]
    assert len(on_demand) == outcome.summary.runners_by_provider["aws-on-demand"]
