"""runnerd.toml parsing and the config check of docs/admission.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from runnerd.admission.model import Policy
from runnerd.cli import main as runnerd_main
from runnerd.config import GiB, Isolation, RuntimeKind, check_budget, parse_config

from rungar.errors import ConfigError

EXAMPLE = """\
[host]
slice = "runnerd.slice"
admission = "measured"
cpu_overcommit = 1.0
runtime = "process"
sample_interval = "1s"

[sizing]
margin = 15
min_jobs = 10

[profiles.node]
command = ["rungar", "fake-runner"]
cpus = 8
memory = "7G"   # still each container's hard limit
slots = 8       # how many run at once; 8 × 7G may exceed MemoryMax
min_memory = "2G"
max_slots = 12

[profiles.jvm]
image = "ghcr.io/ayagmar/runnerd-runner:node-0.0.20"
cpus = 8
memory = "14G"
slots = 2
"""


def test_the_example_config_parses_with_the_documented_defaults() -> None:
    config = parse_config(EXAMPLE)
    assert config.host.admission is Policy.MEASURED
    assert config.host.runtime is RuntimeKind.PROCESS
    assert config.host.sample_interval == 1.0
    assert config.host.holders_interval == 30.0
    assert config.host.cpu_starvation == 120.0
    assert config.sizing.margin.percent == 15
    assert config.sizing.min_jobs == 10
    node = config.profiles["node"]
    assert (node.memory, node.slots, node.min_memory, node.max_slots) == (7 * GiB, 8, 2 * GiB, 12)
    assert node.command == ("rungar", "fake-runner")


def test_an_absolute_margin_is_a_size() -> None:
    config = parse_config(EXAMPLE.replace("margin = 15", 'margin = "512M"'))
    assert config.sizing.margin.absolute == 512 * 1024**2


def test_problems_name_the_file_line_and_key_all_at_once() -> None:
    bad = EXAMPLE.replace('admission = "measured"', 'admission = "peaks"').replace(
        'memory = "14G"', 'memory = "lots"'
    )
    with pytest.raises(ConfigError) as e:
        parse_config(bad, "/etc/runnerd.toml")
    assert e.value.problems[0].startswith("/etc/runnerd.toml:3:1: host.admission: ")
    assert "use caps or measured" in e.value.problems[0]
    assert e.value.problems[1].startswith(
        "/etc/runnerd.toml:23:1: profiles.jvm.memory: 'lots' is not a size"
    )


def test_a_profile_needs_cpus_memory_and_slots() -> None:
    with pytest.raises(ConfigError, match=r"profiles\.x\.slots: is required"):
        parse_config('[profiles.x]\ncpus = 1\nmemory = "1G"\n')


def test_under_caps_slots_times_memory_with_the_mirror_must_fit_memory_max() -> None:
    text = EXAMPLE.replace('admission = "measured"', 'admission = "caps"')
    config = parse_config(text, "runnerd.toml")
    with pytest.raises(ConfigError) as e:
        check_budget(config, 33 * GiB, 8.0, text)
    assert e.value.problems == [
        "runnerd.toml:3:1: profiles: slots × memory (node 8 × 7G, jvm 2 × 14G) take 84G, more than "
        'the slice\'s MemoryMax of 33G; lower slots or memory, or set admission = "measured"'
    ]
    check_budget(config, 84 * GiB, 8.0, text)


def test_under_measured_one_runner_of_each_profile_with_the_mirror_must_fit() -> None:
    config = parse_config(EXAMPLE.replace("[host]", '[host]\nmirror_memory = "1G"'))
    check_budget(config, 15 * GiB, 8.0)
    with pytest.raises(
        ConfigError, match=r"profiles\.jvm\.memory: one runner of 14G with the 1G mirror"
    ):
        check_budget(config, 14 * GiB, 8.0)


def test_measured_admission_needs_a_memory_max() -> None:
    with pytest.raises(ConfigError, match=r"needs a MemoryMax on runnerd\.slice"):
        check_budget(parse_config(EXAMPLE), None, 8.0)


def test_cpu_overcommit_is_refused_when_the_slices_cpus_cannot_be_read() -> None:
    with pytest.raises(ConfigError, match=r"host\.cpu_overcommit: needs the slice's CPUs"):
        check_budget(parse_config(EXAMPLE), 33 * GiB, None)


def test_the_example_config_parses() -> None:
    from pathlib import Path

    from runnerd.config import load_config

    example = Path(__file__).resolve().parents[2] / "config" / "runnerd.example.toml"
    config = load_config(example)
    assert config.profiles["node"].command == ("rungar", "fake-runner")
    check_budget(config, 33 * GiB, 8.0, example.read_text())


# The three runnerd.toml examples of the admission and sizing documentation, as written.
DOCS_AUTO = """\
[sizing]
auto = true

[profiles.node]
image = "ghcr.io/ayagmar/runnerd-runner:node-0.0.20"
cpus = 8
memory = "7G"
slots = 2
min_memory = "2G"   # optional: never lower than this
max_slots = 6       # optional: never more slots than this
"""
DOCS_MEASURED = """\
[host]
slice = "runnerd.slice"
isolation = "sysbox"
admission = "measured"

[profiles.node]
image_stage = "node"
cpus = 8
memory = "7G"   # still each container's hard limit
slots = 8       # how many run at once; 8 × 7G may exceed MemoryMax
"""
DOCS_CPU = """\
[host]
slice = "runnerd.slice"
isolation = "sysbox"
admission = "measured"
cpu_overcommit = 1.0
"""


def test_the_three_examples_are_in_docs_runnerd_md_as_written() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "runnerd.md").read_text()
    blocks = re.findall(r"^```toml\n(.*?)^```", docs, flags=re.M | re.S)
    for example in (DOCS_AUTO, DOCS_MEASURED, DOCS_CPU):
        assert example in blocks


def test_the_documentations_three_examples_load_as_written() -> None:
    auto = parse_config(DOCS_AUTO)
    assert auto.sizing.auto and auto.profiles["node"].max_slots == 6
    measured = parse_config(DOCS_MEASURED)
    assert measured.host.isolation is Isolation.SYSBOX
    assert measured.profiles["node"].image_stage == "node"
    cpu = parse_config(DOCS_CPU)
    assert cpu.host.cpu_overcommit == 1.0 and not cpu.profiles


def test_isolation_or_image_stage_without_runtime_runs_the_docker_runtime() -> None:
    assert parse_config(DOCS_MEASURED).host.runtime is RuntimeKind.DOCKER
    staged = DOCS_AUTO.replace('image = "ghcr.io/ayagmar/runnerd-runner:node-0.0.20"', "")
    staged = staged.replace("[profiles.node]", '[profiles.node]\nimage_stage = "jvm"')
    assert parse_config(staged).host.runtime is RuntimeKind.DOCKER
    assert parse_config(DOCS_AUTO).host.runtime is RuntimeKind.PROCESS


def test_image_stage_names_a_stage_of_the_runner_image_not_an_image() -> None:
    node = parse_config(DOCS_MEASURED).profiles["node"]
    assert node.image == "ghcr.io/ayagmar/runnerd-runner:node-0.0.20"
    own = DOCS_MEASURED.replace(
        'isolation = "sysbox"',
        'isolation = "sysbox"\nrunner_image = "registry.local/runner:{stage}"',
    )
    assert parse_config(own).profiles["node"].image == "registry.local/runner:node"
    with pytest.raises(ConfigError) as e:
        parse_config(DOCS_MEASURED.replace('image_stage = "node"', 'image_stage = "ghcr.io/x:1"'))
    assert "runnerd.toml:7:1: profiles.node.image_stage" in e.value.problems[0]
    assert "not an image reference" in e.value.problems[0]


def test_the_process_runtime_with_isolation_or_image_stage_is_refused_clearly() -> None:
    text = DOCS_MEASURED.replace(
        'admission = "measured"', 'admission = "measured"\nruntime = "process"'
    )
    with pytest.raises(ConfigError) as e:
        parse_config(text)
    problems = "\n".join(e.value.problems)
    assert "runnerd.toml:3:1: host.isolation: the process runtime runs no containers" in problems
    assert "profiles.node.image_stage: names a stage of the runner image" in problems


def test_unsafe_dind_needs_allow_unsafe() -> None:
    text = DOCS_MEASURED.replace('"sysbox"', '"unsafe-dind"')
    with pytest.raises(ConfigError) as e:
        parse_config(text)
    assert "set allow_unsafe = true" in e.value.problems[0]
    allowed = parse_config(text.replace("[host]", "[host]\nallow_unsafe = true"))
    assert allowed.host.isolation is Isolation.UNSAFE_DIND


def test_image_and_image_stage_together_are_refused() -> None:
    with pytest.raises(ConfigError) as e:
        parse_config(
            DOCS_MEASURED.replace('image_stage = "node"', 'image_stage = "node"\nimage = "x"')
        )
    assert "set image or image_stage, not both" in e.value.problems[0]


def test_the_documentations_examples_pass_check_config_without_a_docker_engine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, text in (("auto", DOCS_AUTO), ("measured", DOCS_MEASURED), ("cpu", DOCS_CPU)):
        path = tmp_path / f"{name}.toml"
        # This machine has no runnerd.slice: MemoryMax is given, as --memory-max does.
        path.write_text(
            text.replace("[host]\n", f'[host]\ndocker_socket = "{tmp_path}/none.sock"\n')
        )
        assert runnerd_main(["check-config", "-c", str(path), "--memory-max", "33G"]) == 0, name
        err = capsys.readouterr().err
        if name != "auto":
            assert f"warning: no Docker Engine answers at {tmp_path}/none.sock" in err
    # Without a MemoryMax, measured admission has no budget: that one is a problem.
    assert runnerd_main(["check-config", "-c", str(tmp_path / "measured.toml")]) == 2


def test_an_over_run_holds_among_the_recent_runs_unless_over_run_says_window() -> None:
    from runnerd.admission.model import OverRun
    from runnerd.config import prediction_rules

    assert prediction_rules(parse_config(EXAMPLE)).over_run is OverRun.RECENT
    window = parse_config(
        EXAMPLE.replace('runtime = "process"', 'runtime = "process"\nover_run = "window"')
    )
    assert prediction_rules(window).over_run is OverRun.WINDOW
    with pytest.raises(ConfigError) as e:
        parse_config(
            EXAMPLE.replace('runtime = "process"', 'runtime = "process"\nover_run = "all"')
        )
    assert re.search(r":6:\d+: host\.over_run: .*use recent or window", str(e.value)), str(e.value)
