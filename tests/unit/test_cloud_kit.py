"""The shared cloud kit: the search order, resends of uncertain requests, final refusals,
settings helpers and the provider process's settings file.

The search is driven with the gcp provider's ``Attempt`` and ``Tried`` values."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rungar_gcp.search import Attempt, Tried
from rungar_gcp.settings import GcpSettings

from rungar.cloudkit.search import (
    PlaceAnswer,
    details,
    own_labels,
    runner_problems,
    search,
    send_until_certain,
    stop_refusal,
    unoffered_refusal,
)
from rungar.cloudkit.serve import (
    ClosableProvider,
    SettingsSources,
    read_settings_file,
    read_sources,
    run_provider_server,
)
from rungar.cloudkit.settings import (
    DEFAULT_DISK,
    SettingsProblems,
    disk_bytes,
    flag,
    string_list,
    timeout,
    types_and_template,
    unknown_keys,
)
from rungar.errors import ConfigError
from rungar.model.labels import INSTALLATION, MANAGED
from rungar.model.machine import Created, Machine, MachineState, Refusal, RefusalKind
from rungar.model.runner_block import RunnerBlock
from rungar.rpc.plugin import SETTINGS_ENV
from rungar.testing.clock import JumpingClock

MADE = Created(Machine("r-1", MachineState.RUNNING, {}, "t1", 0.0, "cloud"))
PLAN = [Attempt(p, k) for p in ("a", "b", "c") for k in ("t1", "t2")]


async def run_search(
    answers: dict[Attempt, PlaceAnswer | None],
) -> tuple[Created | list[Tried], list[Attempt]]:
    asked: list[Attempt] = []

    async def attempt(spot: Attempt) -> Created | Tried | None:
        asked.append(spot)
        if spot not in answers:
            return MADE
        outcome = answers[spot]
        return None if outcome is None else Tried(spot, outcome, "no")

    return await search(PLAN, lambda s: s.machine_type, attempt), asked


async def test_a_type_out_of_quota_is_not_tried_in_the_other_places() -> None:
    answers: dict[Attempt, PlaceAnswer | None] = {s: PlaceAnswer.STOCK for s in PLAN}
    answers[Attempt("a", "t1")] = PlaceAnswer.QUOTA
    result, asked = await run_search(answers)
    assert isinstance(result, list) and len(result) == 4
    assert [str(s) for s in asked] == ["a/t1", "a/t2", "b/t2", "c/t2"]


async def test_a_stopping_outcome_ends_the_search_and_a_skip_is_not_recorded() -> None:
    answers: dict[Attempt, PlaceAnswer | None] = {
        Attempt("a", "t1"): None,
        Attempt("a", "t2"): PlaceAnswer.DENIED,
    }
    result, asked = await run_search(answers)
    assert isinstance(result, list) and [m.outcome for m in result] == [PlaceAnswer.DENIED]
    assert len(asked) == 2


async def test_the_first_attempt_that_makes_a_machine_ends_the_search() -> None:
    result, asked = await run_search({Attempt("a", "t1"): PlaceAnswer.STOCK})
    assert result == MADE and len(asked) == 2


async def resend(
    answers: list[PlaceAnswer], found: Created | None
) -> tuple[object, int, JumpingClock]:
    clock = JumpingClock()
    sent = 0
    heard: list[int] = []

    async def send() -> Created | Tried:
        nonlocal sent
        sent += 1
        if sent > len(answers):
            return MADE
        return Tried(Attempt("a", "t1"), answers[sent - 1], f"answer {sent}")

    async def find() -> Created | None:
        return found

    result = await send_until_certain(send, find, clock, lambda n, _: heard.append(n))
    assert heard == list(range(1, len(heard) + 1))
    return result, sent, clock


async def test_an_uncertain_request_is_resent_until_an_answer_is_certain() -> None:
    result, sent, clock = await resend([PlaceAnswer.UNCERTAIN, PlaceAnswer.STOCK], None)
    assert isinstance(result, Tried) and result.outcome is PlaceAnswer.STOCK
    assert sent == 2 and clock.slept == [1.0]


async def test_four_uncertain_answers_are_settled_by_looking_the_machine_up() -> None:
    result, sent, clock = await resend([PlaceAnswer.UNCERTAIN] * 4, MADE)
    assert result == MADE and sent == 4 and clock.slept == [1.0, 2.0, 4.0]


async def test_nothing_found_after_four_uncertain_answers_reports_the_last_one() -> None:
    result, sent, _ = await resend([PlaceAnswer.UNCERTAIN] * 4, None)
    assert isinstance(result, Tried) and result.detail == "answer 4" and sent == 4


def test_stopping_outcomes_decide_the_refusal_and_others_do_not() -> None:
    def last(outcome: PlaceAnswer) -> Refusal | None:
        first = Tried(Attempt("a", "t1"), PlaceAnswer.STOCK, "no")
        return stop_refusal([first, Tried(Attempt("b", "t1"), outcome, "no")], "vm")

    assert last(PlaceAnswer.STOCK) is None and last(PlaceAnswer.FAILED) is None
    kinds = {o: (r.kind, r.resource) for o in PlaceAnswer if (r := last(o)) is not None}
    assert kinds == {
        PlaceAnswer.INVALID: (RefusalKind.INVALID, "runner"),
        PlaceAnswer.DENIED: (RefusalKind.INVALID, "permission"),
        PlaceAnswer.REFUSED: (RefusalKind.FAILED, "api"),
        PlaceAnswer.UNCERTAIN: (RefusalKind.FAILED, "api"),
    }
    uncertain = last(PlaceAnswer.UNCERTAIN)
    assert uncertain is not None
    assert uncertain.message == "b/t1: no certain answer after 4 tries and no vm found: no"


def test_no_place_offering_the_types_names_them_sorted_once() -> None:
    refusal = unoffered_refusal("zone", "r1", "machine type", ["t2", "", "t1", "t2"])
    assert (refusal.kind, refusal.resource) == (RefusalKind.INVALID, "machine type")
    assert refusal.message == "no zone of r1 offers machine type t1 or t2"
    assert unoffered_refusal("zone", "r1", "machine type", [""]).message.endswith("(none)")
    full = Tried(Attempt("a", "t1"), PlaceAnswer.STOCK, "full")
    assert details([full, full]) == "a/t1: full; a/t1: full"


def test_a_runner_of_another_installation_is_refused_and_ours_is_marked_managed() -> None:
    refused = own_labels({INSTALLATION: "gh-other"}, "gh-ours")
    assert isinstance(refused, Refusal) and refused.resource == "installation"
    assert own_labels({"team": "x"}, "gh-ours") == {
        "team": "x",
        INSTALLATION: "gh-ours",
        MANAGED: "true",
    }


def test_runner_problems_prefix_a_block_that_does_not_parse() -> None:
    def parse(block: RunnerBlock) -> tuple[object, list[str]]:
        return None, ["runner.x: bad"]

    assert runner_problems({"vcpus": "many"}, parse)[0].startswith("runner.")
    assert runner_problems({}, parse) == ["runner.x: bad"]


@pytest.mark.parametrize(
    ("value", "expected", "problem"),
    [
        (None, (), False),
        ("a", ("a",), False),
        (["a", "b"], ("a", "b"), False),
        ("", (), True),
        (["a", ""], (), True),
        (3, (), True),
    ],
)
def test_a_string_or_list_of_strings(
    value: object, expected: tuple[str, ...], problem: bool
) -> None:
    problems: list[str] = []
    assert string_list(value, "k", problems) == expected
    assert problems == (["k: must be a string or a list of strings"] if problem else [])


def test_gcp_and_aws_refuse_an_empty_zone_or_machine_type_alike() -> None:
    from rungar_aws.settings import AwsSettings
    from rungar_gcp.settings import GcpSettings

    with pytest.raises(ValueError, match="zones: must be a string or a list of strings"):
        GcpSettings.parse({"project": "p", "installation": "i", "zones": ""})
    with pytest.raises(ValueError, match="subnets"):
        AwsSettings.parse({"region": "eu-west-1", "installation": "i", "subnets": ""})


def test_flags_timeouts_and_unknown_keys_are_reported_and_defaulted() -> None:
    problems = unknown_keys({"b": 1, "a": 2, "ok": 3}, {"ok"}, "runner.")
    assert flag({"spot": None}, "spot", False, problems, "runner.") is False
    assert flag({}, "external_ip", True, problems) is True
    assert timeout({"timeout": "soon"}, problems) == 30.0
    assert timeout({"timeout": "2m"}, problems) == 120.0
    assert problems[:3] == [
        "runner.a: unknown key",
        "runner.b: unknown key",
        "runner.spot: must be true or false",
    ]
    assert problems[3].startswith("timeout: ") and len(problems) == 4


def test_a_runner_needs_types_or_a_template_and_an_image_unless_templated() -> None:
    problems: list[str] = []
    assert types_and_template(RunnerBlock(), "machine_type", "tpl", "a string", problems) == (
        (),
        "",
    )
    assert problems == [
        "runner.machine_type: required unless tpl is set",
        "runner.image: required unless tpl is set",
    ]
    problems = []
    block = RunnerBlock(extra={"tpl": "t-1"})
    assert types_and_template(block, "machine_type", "tpl", "a string", problems) == ((), "t-1")
    assert problems == []


def test_the_disk_is_disk_size_else_the_block_s_disk_else_50gib() -> None:
    problems: list[str] = []
    assert disk_bytes(RunnerBlock(), problems) == DEFAULT_DISK
    assert disk_bytes(RunnerBlock(disk_bytes=2**30), problems) == 2**30
    assert disk_bytes(RunnerBlock(extra={"disk_size": "20GiB"}), problems) == 20 * 2**30
    assert disk_bytes(RunnerBlock(extra={"disk_size": "lots"}), problems) == DEFAULT_DISK
    assert len(problems) == 1 and problems[0].startswith("runner.disk_size: ")


def test_settings_files_are_toml_or_yaml_mappings(tmp_path: Path) -> None:
    (tmp_path / "p.toml").write_text('zones = ["a"]\n')
    (tmp_path / "p.yaml").write_text("zones: [a]\n")
    (tmp_path / "list.yaml").write_text("- a\n")
    assert read_settings_file(str(tmp_path / "p.toml")) == {"zones": ["a"]}
    assert read_settings_file(str(tmp_path / "p.yaml")) == {"zones": ["a"]}
    with pytest.raises(ConfigError, match="must be a mapping"):
        read_settings_file(str(tmp_path / "list.yaml"))
    with pytest.raises(ConfigError):
        read_settings_file(str(tmp_path / "missing.yaml"))


def test_settings_the_provider_refuses_exit_2_before_anything_is_opened(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "p.yaml").write_text("zones: [a]\n")

    def parse(raw: object) -> object:
        raise ValueError("zones: bad; installation: required")

    def never(settings: object) -> ClosableProvider:
        raise AssertionError("opened")

    code = run_provider_server("prov", "d", parse, never, ["--config", str(tmp_path / "p.yaml")])
    assert code == 2
    assert capsys.readouterr().err.strip().endswith("p.yaml: zones: bad; installation: required")


HANDED = {
    "name": "gcp-eu",
    "project": "acme-ci",
    "zones": ["europe-west1-b", "europe-west1-c"],
    "installation": "gh-0123456789ab",
}
FROM_RUNGAR = "settings from rungar (scale_sets.yaml provider gcp-eu)"


def handed_file(tmp_path: Path, settings: dict[str, Any]) -> str:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(settings))
    return str(path)


def test_the_config_files_keys_are_laid_over_what_rungar_hands_over(tmp_path: Path) -> None:
    (tmp_path / "gcp.yaml").write_text("endpoint: http://127.0.0.1:9\nzones: [us-east1-b]\n")
    env = {SETTINGS_ENV: handed_file(tmp_path, HANDED)}
    sources = read_sources(str(tmp_path / "gcp.yaml"), env)
    assert sources.handed_from == FROM_RUNGAR
    assert sources.merged() == {**HANDED, "endpoint": "http://127.0.0.1:9", "zones": ["us-east1-b"]}
    assert read_sources("", env).merged() == HANDED
    assert read_sources(str(tmp_path / "gcp.yaml"), {}).merged() == {
        "endpoint": "http://127.0.0.1:9",
        "zones": ["us-east1-b"],
    }


def test_neither_settings_from_rungar_nor_a_config_file_is_refused_naming_both() -> None:
    with pytest.raises(ConfigError) as err:
        read_sources("", {})
    assert "--config" in str(err.value) and SETTINGS_ENV in str(err.value)


def test_settings_from_rungar_that_cannot_be_read_name_the_variable(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("[1, 2]")
    for path in (str(tmp_path / "bad.json"), str(tmp_path / "gone.json")):
        with pytest.raises(ConfigError, match=f"settings from rungar \\({SETTINGS_ENV}={path}\\)"):
            read_sources("", {SETTINGS_ENV: path})


def test_each_problem_names_the_place_its_key_came_from() -> None:
    handed = {**HANDED, "zones": ["europe-west1-b", "us-central1-a"]}
    handed.pop("installation")
    sources = SettingsSources(handed, FROM_RUNGAR, {"anonymous": "yes", "bogus": 1}, "gcp.yaml")
    with pytest.raises(SettingsProblems) as err:
        GcpSettings.parse(sources.merged())
    lines = sources.attribute(err.value.problems)
    assert lines == [
        "gcp.yaml: bogus: unknown key; anonymous: must be true or false",
        f"{FROM_RUNGAR} and gcp.yaml: installation: required",
        f"{FROM_RUNGAR}: zones: europe-west1-b, us-central1-a are not all in one region",
    ]


def test_a_key_the_file_overrides_is_the_files_problem() -> None:
    sources = SettingsSources(HANDED, FROM_RUNGAR, {"zones": []}, "gcp.yaml")
    assert sources.attribute(["zones: at least one zone is required"]) == [
        "gcp.yaml: zones: at least one zone is required"
    ]
    alone = SettingsSources(HANDED, FROM_RUNGAR)
    assert alone.attribute(["timeout: 'x' is not a duration"]) == [
        f"{FROM_RUNGAR}: timeout: 'x' is not a duration"
    ]


def test_without_config_the_provider_is_opened_with_what_rungar_handed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(SETTINGS_ENV, handed_file(tmp_path, HANDED))
    opened: list[GcpSettings] = []

    def open_provider(settings: GcpSettings) -> ClosableProvider:
        opened.append(settings)
        raise ConfigError(["stop before serving"])

    code = run_provider_server("prov", "d", GcpSettings.parse, open_provider, [])
    assert code == 2 and capsys.readouterr().err.strip() == "prov: stop before serving"
    [settings] = opened
    assert (settings.name, settings.project, settings.installation) == (
        "gcp-eu",
        "acme-ci",
        "gh-0123456789ab",
    )
    assert settings.zones == ("europe-west1-b", "europe-west1-c")


def test_handed_over_problems_exit_2_naming_the_scale_sets_provider(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(SETTINGS_ENV, handed_file(tmp_path, {**HANDED, "zones": []}))

    def never(settings: object) -> ClosableProvider:
        raise AssertionError("opened")

    code = run_provider_server("prov", "d", GcpSettings.parse, never, [])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err == f"prov: {FROM_RUNGAR}: zones: at least one zone is required"


def test_no_settings_at_all_exit_2_naming_both_places(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(SETTINGS_ENV, raising=False)

    def never(settings: object) -> ClosableProvider:
        raise AssertionError("opened")

    assert run_provider_server("prov", "d", GcpSettings.parse, never, []) == 2
    err = capsys.readouterr().err
    assert err.startswith("prov: no settings: give --config FILE") and SETTINGS_ENV in err


@pytest.mark.parametrize("provider_type", ["gcp", "aws"])
def test_every_key_scale_sets_yaml_hands_over_is_one_the_plugin_reads(provider_type: str) -> None:
    from rungar_aws.settings import SETTINGS_KEYS as AWS_KEYS
    from rungar_gcp.settings import SETTINGS_KEYS as GCP_KEYS

    from rungar.config.schema import PROVIDER_TYPES

    plugin_keys = {"gcp": GCP_KEYS, "aws": AWS_KEYS}[provider_type]
    handed = {f.name for f in PROVIDER_TYPES[provider_type]} | {"name", "installation"}
    assert handed <= plugin_keys, f"the plugin refuses {sorted(handed - plugin_keys)}"


def test_the_kit_imports_no_cloud_sdk_and_no_grpc() -> None:
    code = (
        "import sys, rungar.cloudkit.search, rungar.cloudkit.settings, rungar.cloudkit.serve\n"
        "print([m for m in ('grpc', 'boto3', 'botocore', 'google.cloud') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
