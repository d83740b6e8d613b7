"""``rungar simulate``: the whole fleet replayed on a virtual clock through the real scaling,
placement and runnerd admission code (docs/simulate.md).

The seeded random fleets run 15 seeds by default; RUNGAR_FLEET_SEEDS=500 runs more. A failure
names its seed and the call that replays it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rungar.cli.main import main
from rungar.config.loader import parse_scale_sets
from rungar.config.model import HoldChoice, Placement, ScaleSetsFile
from rungar.errors import ConfigError
from rungar.placement import Fleet
from rungar.simulate.history import SimJob, assign_scale_sets, load_jobs
from rungar.simulate.invariants import FleetInvariantBroken, check_seed
from rungar.simulate.models import Models, ProviderModel, Window, parse_models
from rungar.simulate.report import as_json, render
from rungar.simulate.run import replay_one
from rungar.simulate.scenario import Scenario
from rungar.simulate.synthetic import fragmented_fleet, host_toml

T0 = 1_800_000_000.0


def cloud_fleet(
    quota: int = 0, outage: tuple[float, float] | None = None
) -> tuple[ScaleSetsFile, Models]:
    """One runnerd host (2 slots) first, then a cloud."""
    config = parse_scale_sets(
        "version: 1\nproviders:\n"
        "  - { name: host, type: runnerd, weight: 2, address: 'unix:///run/h.sock' }\n"
        "  - { name: cloud, type: fake }\n"
        "scale_sets:\n  - name: ci\n    max_runners: 20\n    placement: pack\n"
        "    providers: [host, cloud]\n",
        "fleet.yaml",
    )
    outages = (Window(outage[0], outage[1]),) if outage else ()
    models = Models(
        {
            "host": ProviderModel("host", host_toml("8G", "caps", [("ci", 2, "4G", 2)]), "h"),
            "cloud": ProviderModel(
                "cloud", quota=quota, boot=60.0, price_per_hour=1.0, outages=outages
            ),
        }
    )
    return config, models


def burst(n: int, duration: float = 600.0, at: float = T0) -> list[SimJob]:
    return [
        SimJob("ci", "acme/app", "ci", "build", at + i, duration, scale_set="ci") for i in range(n)
    ]


def test_the_same_inputs_give_the_same_table_to_the_digit() -> None:
    config, models, jobs = fragmented_fleet(days=0.5, seed=3)
    rows = [replay_one(Scenario(), config, models, jobs) for _ in range(2)]
    assert render(rows[:1], len(jobs), 0.5) == render(rows[1:], len(jobs), 0.5)
    assert as_json(rows[:1], len(jobs)) == as_json(rows[1:], len(jobs))


def test_hosts_come_first_and_only_the_overflow_goes_to_the_cloud() -> None:
    config, models = cloud_fleet()
    row = replay_one(Scenario(), config, models, burst(5))
    host, cloud = row.result.backends["host"], row.result.backends["cloud"]
    assert host.usage.created == 2  # its two slots
    assert cloud.usage.created == 3
    # Refused once as full, the host is skipped (backoff) and the rest go straight on.
    assert host.usage.refusals == {"full": 1}
    # Each cloud machine lives from its create through a 60 s boot and a 600 s job.
    assert cloud.usage.machine_seconds == pytest.approx(3 * 660.0)
    assert as_json([row], 5)["scenarios"][0]["providers"]["cloud"]["cost"] == pytest.approx(0.55)


def test_a_cloud_at_its_quota_refuses_as_full_and_the_jobs_wait_for_room() -> None:
    config, models = cloud_fleet(quota=1)
    row = replay_one(Scenario(), config, models, burst(4))
    cloud = row.result.backends["cloud"]
    assert cloud.usage.created == 1
    assert cloud.usage.refusals.get("full", 0) >= 1
    assert max(row.result.waits["ci"]) >= 600  # the fourth job waited for a first one to end


def test_a_provider_in_an_outage_is_not_answered_and_runners_wait_for_it() -> None:
    config, models = cloud_fleet(outage=(0.0, 1800.0))
    row = replay_one(Scenario(), config, models, burst(3, duration=3600.0))
    cloud = row.result.backends["cloud"]
    # Its List went unanswered at the first pass: skipped, never asked, until it answers.
    assert cloud.usage.refusals == {}
    assert cloud.usage.created == 1
    assert sorted(row.result.waits["ci"])[-1] >= 1800  # placed once the outage ended


def test_priority_holds_cut_the_large_runners_wait_on_a_fragmented_fleet() -> None:
    config, models, jobs = fragmented_fleet(days=1.0, seed=1)
    held = replay_one(Scenario(), config, models, jobs).result
    free = replay_one(Scenario("no priority", no_priority=True), config, models, jobs).result
    assert held.holds["large"].taken > 0 and held.holds["large"].seconds > 0
    assert free.holds["large"].taken == 0
    assert max(held.waits["large"]) < max(free.waits["large"])


def test_holding_every_full_host_serves_the_large_runners_sooner_than_holding_one() -> None:
    config, models, jobs = fragmented_fleet(days=1.0, seed=1)
    every = replay_one(Scenario(), config, models, jobs).result
    one = replay_one(Scenario("hold one", hold_one=True), config, models, jobs).result
    assert every.holds["large"].taken > one.holds["large"].taken, "both hosts held, not one"
    assert sum(every.waits["large"]) < sum(one.waits["large"])
    assert every.held_room_idle, "the holder took room held for it"


def test_holding_only_where_room_comes_soonest_keeps_the_small_runners_waiting_less() -> None:
    # On this trace; over 30 days the benchmark measures it (docs/benchmarks.md, fleet).
    config, models, jobs = fragmented_fleet(days=0.5, seed=1)
    every = replay_one(Scenario(), config, models, jobs).result
    soonest = replay_one(Scenario(hold=HoldChoice.SOONEST_ROOM), config, models, jobs).result
    assert 0 < soonest.holds["large"].seconds < every.holds["large"].seconds, "fewer held"
    assert sum(soonest.waits["small"]) < sum(every.waits["small"])
    assert len(soonest.waits["large"]) == len(every.waits["large"]), "every large job ran"


def test_measured_admission_starts_more_at_once_and_kills_when_peaks_outgrow_the_slice() -> None:
    toml = host_toml("8G", "caps", [("ci", 2, "4G", 4)])
    config, _ = cloud_fleet()
    config = parse_scale_sets(
        "version: 1\nproviders:\n  - { name: host, type: runnerd, address: 'unix:///h' }\n"
        "scale_sets:\n  - name: ci\n    max_runners: 20\n    providers: [host]\n",
        "one.yaml",
    )
    models = Models({"host": ProviderModel("host", toml, "h")})
    # 40 light runs teach the predictor, then 4 at once that peak at 3G each: 12G > 8G.
    gib = 2**30
    light = [SimJob("ci", "r", "w", "j", T0 + i * 700, 600, gib // 2, 4 * gib, scale_set="ci")
             for i in range(40)]  # fmt: skip
    heavy = [SimJob("ci", "r", "w", "j", T0 + 28_000 + i, 600, 3 * gib, 4 * gib, scale_set="ci")
             for i in range(4)]  # fmt: skip
    caps = replay_one(Scenario(), config, models, light + heavy).result
    measured = replay_one(Scenario("m", admission="measured"), config, models, light + heavy).result
    assert caps.backends["host"].usage.kills == 0
    assert max(caps.waits["ci"]) > 500  # two at a time under caps
    assert measured.backends["host"].usage.kills > 0


def test_what_ifs_change_only_their_own_row(tmp_path: Path) -> None:
    config, models, jobs = fragmented_fleet(days=0.25, seed=2)
    pack = replay_one(Scenario("pack", placement=Placement.PACK), config, models, jobs)
    removed = replay_one(Scenario("rm", remove_provider="compute2"), config, models, jobs)
    limited = replay_one(Scenario("max", max_runners=("compute1", 1)), config, models, jobs)
    assert "compute2" not in removed.result.backends
    assert (
        limited.result.backends["compute1"].usage.created
        < pack.result.backends["compute1"].usage.created
    )
    baseline = replay_one(Scenario(), config, models, jobs)
    again = replay_one(Scenario(), config, models, jobs)
    assert as_json([baseline], 1) == as_json([again], 1)


def test_a_models_file_problem_names_its_file_line_and_key() -> None:
    text = "providers:\n  aws:\n    cloud: {quota: -1, boot: soon}\n    colour: red\n"
    with pytest.raises(ConfigError) as caught:
        parse_models(text, "models.yaml")
    problems = caught.value.problems
    assert (
        "models.yaml:3: providers.aws.cloud.quota: must be a whole number, at least 0" in problems
    )
    assert any(p.startswith("models.yaml:3: providers.aws.cloud.boot: ") for p in problems)
    assert any(p.startswith("models.yaml:4: providers.aws.colour: unknown key") for p in problems)


def test_a_history_line_that_cannot_be_read_is_named_by_its_line(tmp_path: Path) -> None:
    history = tmp_path / "jobs.jsonl"
    history.write_text('{"queued_at": 1, "duration": 5}\n{"duration": 5}\n')
    with pytest.raises(ConfigError) as caught:
        load_jobs([str(history)])
    assert caught.value.problems == [f"{history}:2: queued_at: is required"]


def test_jobs_of_no_configured_scale_set_are_named_with_the_way_to_map_them() -> None:
    jobs = [SimJob("jvm", "", "", "", T0, 1.0)]
    with pytest.raises(ConfigError) as caught:
        assign_scale_sets(jobs, ["small", "large"], {})
    assert "--scale-set jvm=NAME" in caught.value.problems[0]
    assert assign_scale_sets(jobs, ["small", "large"], {"jvm": "large"})[0].scale_set == "large"


def test_rungar_simulate_prints_a_row_per_what_if_and_the_same_json_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "host.toml").write_text(host_toml("8G", "caps", [("ci", 2, "4G", 2)]))
    (tmp_path / "scale_sets.yaml").write_text(
        "version: 1\nproviders:\n"
        "  - { name: host, type: runnerd, weight: 2, address: 'unix:///run/h.sock' }\n"
        "  - { name: cloud, type: fake }\n"
        "scale_sets:\n  - name: ci\n    max_runners: 20\n    placement: pack\n"
        "    providers: [host, cloud]\n"
    )
    (tmp_path / "models.yaml").write_text(
        "providers:\n  host: {runnerd: host.toml}\n"
        "  cloud: {cloud: {boot: 30s, price_per_hour: 0.5}}\n"
    )
    lines = [json.dumps({"scale_set": "ci", "queued_at": T0 + 60 * i, "duration": 900})
             for i in range(30)]  # fmt: skip
    (tmp_path / "jobs.jsonl").write_text("\n".join(lines) + "\n")
    argv = [
        "simulate", str(tmp_path / "scale_sets.yaml"), "--history", str(tmp_path / "jobs.jsonl"),
        "--models", str(tmp_path / "models.yaml"), "--remove-provider", "cloud",
        "--add-host", str(tmp_path / "host.toml"), "--speed", "2", "--hold", "soonest_room",
    ]  # fmt: skip
    assert main(argv) == 0
    text = capsys.readouterr().out
    for scenario in ("baseline", "remove cloud", "add host host", "speed x2", "hold soonest_room"):
        assert f"\n{scenario} " in text
    assert main([*argv, "--json"]) == 0
    first = capsys.readouterr().out
    assert main([*argv, "--json"]) == 0
    assert capsys.readouterr().out == first
    scenarios = [s["scenario"] for s in json.loads(first)["scenarios"]]
    assert scenarios == [
        "baseline", "hold soonest_room", "add host host", "remove cloud", "speed x2"
    ]  # fmt: skip


def test_a_runnerd_provider_without_a_model_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "s.yaml").write_text(
        "version: 1\nproviders:\n  - { name: host, type: runnerd, address: 'unix:///h' }\n"
        "scale_sets:\n  - name: ci\n    max_runners: 2\n    providers: [host]\n"
    )
    (tmp_path / "j.jsonl").write_text('{"queued_at": 1, "duration": 5}\n')
    assert main(["simulate", str(tmp_path / "s.yaml"), "--history", str(tmp_path / "j.jsonl")]) == 2
    assert "provider host is a runnerd host" in capsys.readouterr().err


SEEDS = range(int(os.environ.get("RUNGAR_FLEET_SEEDS", "15")))


def test_random_fleets_keep_every_limit_and_start_every_job_once() -> None:
    for seed in SEEDS:
        result = check_seed(seed)  # raises, naming the seed and the call that replays it
        assert result.events > 0


def test_a_seed_replays_to_the_same_result() -> None:
    one, two = check_seed(11), check_seed(11)
    assert one.waits == two.waits and one.end == two.end


def test_a_broken_limit_is_caught_and_names_the_seed_that_replays_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A fleet that never skips a provider (no limits, backoffs or holds) must be caught.
    monkeypatch.setattr(
        Fleet, "skip_reason", lambda self, scale_set, provider, now, reserve=False: None
    )
    with pytest.raises(FleetInvariantBroken) as caught:
        for seed in SEEDS:
            check_seed(seed)
    assert f"rungar.simulate.invariants.check_seed({caught.value.seed})" in str(caught.value)
    assert "max_runners" in str(caught.value)


def test_the_readme_example_replays_generated_history_through_the_examples_configs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from runnerd.history_generate import generate, write_history

    db = tmp_path / "jobs.db"
    write_history(db, generate(300, 7, 1, T0))
    root = Path(__file__).resolve().parents[2] / "examples"
    argv = [
        "simulate", str(root / "03-hosts-then-cloud" / "scale_sets.yaml"), "--history", str(db),
        "--models", str(root / "simulate" / "models.yaml"),
        "--placement", "spread", "--remove-provider", "host2", "--speed", "3",
    ]  # fmt: skip
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert text.startswith("300 jobs over")
    for row in ("\nbaseline ", "\nplacement spread ", "\nremove host2 ", "\nspeed x3 "):
        assert text.count(row) == 2, row  # one line in each table
