"""Every config refusal: a ConfigError naming file, line, column and key path."""

from __future__ import annotations

from pathlib import Path

import pytest

from rungar.config.loader import load_scale_sets, parse_scale_sets, parse_scale_sets_bytes
from rungar.errors import ConfigError

# Line 2 col 5 is providers[0].name; line 5 col 5 is scale_sets[0].name.
VALID = """\
providers:
  - name: compute1
    type: fake
scale_sets:
  - name: small
    max_runners: 2
    providers: [compute1]
"""


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_scale_sets(text, "s.yaml")
    return caught.value.problems


def refused_with(text: str, expected: str) -> None:
    found = problems(text)
    assert expected in found, "\n".join(found)


def test_the_valid_base_file_loads() -> None:
    assert parse_scale_sets(VALID, "s.yaml").scale_sets[0].name == "small"


def test_an_unknown_key_is_refused_with_the_closest_known_key() -> None:
    text = VALID.replace("    max_runners: 2\n", "    max_runners: 2\n    max_runner: 3\n")
    refused_with(
        text, "s.yaml:7:5: scale_sets[0].max_runner: unknown key; did you mean max_runners?"
    )


def test_an_unknown_key_without_a_close_one_lists_the_known_keys() -> None:
    text = VALID + "colour: blue\n"
    found = problems(text)
    assert any(
        p.startswith("s.yaml:8:1: colour: unknown key; known keys are version") for p in found
    )


def test_an_unknown_key_of_a_known_provider_type_is_refused() -> None:
    text = VALID.replace("    type: fake\n", "    type: fake\n    vcpu: 4\n")
    refused_with(
        text, "s.yaml:4:5: providers[0].vcpu: unknown key for type fake; did you mean vcpus?"
    )


def test_a_runnerd_provider_refuses_a_key_of_another_type() -> None:
    text = VALID.replace(
        "    type: fake\n", "    type: runnerd\n    address: h:1\n    zones: [a]\n"
    )
    found = problems(text)
    assert any(
        p.startswith("s.yaml:5:5: providers[0].zones: unknown key for type runnerd") for p in found
    )


def test_a_duplicate_key_is_refused_naming_the_first() -> None:
    text = VALID.replace("    max_runners: 2\n", "    max_runners: 2\n    max_runners: 3\n")
    refused_with(text, "s.yaml:7:5: scale_sets[0].max_runners: duplicate key (first at line 6)")


def test_a_python_tag_is_refused_and_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    text = VALID.replace(
        "  - name: small\n",
        f"  - name: !!python/object/apply:os.system ['touch {marker}']\n",
    )
    refused_with(
        text,
        "s.yaml:5:11: scale_sets[0].name: "
        "the tag !!python/object/apply:os.system is not allowed here",
    )
    assert not marker.exists()


def test_a_local_tag_is_refused() -> None:
    text = VALID.replace("max_runners: 2", "max_runners: !env MAX")
    refused_with(text, "s.yaml:6:18: scale_sets[0].max_runners: the tag !env is not allowed here")


def test_a_python_tag_on_a_key_is_refused() -> None:
    text = VALID + "!!python/name:os.system : 1\n"
    refused_with(text, "s.yaml:8:1: the tag !!python/name:os.system is not allowed here")


def test_an_alias_expansion_bomb_is_refused() -> None:
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for i in range(1, 10):
        prev = f"*a{i - 1}"
        lines.append(f"a{i}: &a{i} [{', '.join([prev] * 10)}]")
    text = VALID + "x-bomb:\n" + "\n".join("  " + line for line in lines) + "\n"
    found = problems(text)  # how quickly: benchmarks/, not here
    assert "s.yaml:1:1: more than 100000 nodes once aliases are expanded (an alias bomb?)" in found


def test_an_alias_to_its_own_container_is_refused() -> None:
    text = VALID.replace("    providers: [compute1]\n", "    providers: &p [compute1, *p]\n")
    refused_with(
        text, "s.yaml:7:16: scale_sets[0].providers[1]: an alias refers to a node that contains it"
    )


def test_nesting_deeper_than_32_is_refused() -> None:
    deep = "{a: " * 40 + "1" + "}" * 40
    text = VALID.replace("    type: fake\n", f"    type: fake\n    runner: {deep}\n")
    # the file, providers, providers[0] and runner are levels 1 to 4; level 33 opens at the
    # 30th "{" of line 4, which starts in column 13
    refused_with(text, f"s.yaml:4:{13 + 4 * 29}: nesting is deeper than 32 levels")


def test_very_deep_nesting_is_refused_without_a_recursion_error() -> None:
    text = "a: " + "[" * 100_000 + "]" * 100_000 + "\n"
    assert problems(text) == ["s.yaml:1:35: nesting is deeper than 32 levels"]


def test_a_file_over_one_mebibyte_is_refused_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(b"#" * (1024 * 1024) + b"\n")
    with pytest.raises(ConfigError) as caught:
        load_scale_sets(path)
    assert caught.value.problems == [
        f"{path}:1:1: the file is 1048577 bytes; at most 1 MiB is read"
    ]


def test_a_text_over_one_mebibyte_is_refused() -> None:
    assert problems(VALID + "#" * (1024 * 1024)) == ["s.yaml:1:1: the file is larger than 1 MiB"]


def test_a_yaml_11_boolean_where_a_string_is_expected_must_be_quoted() -> None:
    text = VALID.replace("name: compute1", "name: no")
    refused_with(text, "s.yaml:2:5: providers[0].name: no is read as the boolean false; quote it")


def test_a_boolean_label_must_be_quoted() -> None:
    text = VALID.replace("    max_runners: 2\n", "    max_runners: 2\n    labels: [on, linux]\n")
    refused_with(
        text, "s.yaml:7:14: scale_sets[0].labels[0]: on is read as the boolean true; quote it"
    )


def test_a_quoted_no_is_a_name() -> None:
    text = VALID.replace("name: compute1", "name: 'no'").replace("[compute1]", "['no']")
    assert parse_scale_sets(text, "s.yaml").providers[0].name == "no"


@pytest.mark.parametrize(
    ("weight", "message"),
    [
        ("0", "must be positive, not 0"),
        ("-1.5", "must be positive, not -1.5"),
        (".nan", ".nan is not a finite number"),
        (".inf", ".inf is not a finite number"),
        ("'2'", "must be a number, not the string '2'"),
        ("true", "must be a number, not the boolean true"),
    ],
)
def test_a_weight_that_is_not_positive_and_finite_is_refused(weight: str, message: str) -> None:
    text = VALID.replace("    type: fake\n", f"    type: fake\n    weight: {weight}\n")
    refused_with(text, f"s.yaml:4:5: providers[0].weight: {message}")


@pytest.mark.parametrize(
    ("value", "message"), [("0", "must be at least 1"), ("10001", "must be at most 10000")]
)
def test_a_scale_set_max_runners_outside_1_to_10000_is_refused(value: str, message: str) -> None:
    text = VALID.replace("max_runners: 2", f"max_runners: {value}")
    refused_with(text, f"s.yaml:6:5: scale_sets[0].max_runners: {message}")


@pytest.mark.parametrize(
    ("value", "message"), [("0", "must be at least 1"), ("10001", "must be at most 10000")]
)
def test_a_provider_max_runners_outside_1_to_10000_is_refused(value: str, message: str) -> None:
    text = VALID.replace("    type: fake\n", f"    type: fake\n    max_runners: {value}\n")
    refused_with(text, f"s.yaml:4:5: providers[0].max_runners: {message}")


def test_min_runners_above_max_runners_is_refused() -> None:
    text = VALID.replace("    max_runners: 2\n", "    max_runners: 2\n    min_runners: 3\n")
    refused_with(text, "s.yaml:7:5: scale_sets[0].min_runners: is 3; at most max_runners (2)")


def test_a_reference_to_an_unknown_provider_is_refused_with_a_suggestion() -> None:
    text = VALID.replace("[compute1]", "[compute1, compute2x]").replace(
        "providers:\n  - name: compute1\n    type: fake\n",
        "providers:\n  - name: compute1\n    type: fake\n  - name: compute2\n    type: fake\n",
    )
    refused_with(
        text,
        "s.yaml:9:27: scale_sets[0].providers[1]: "
        "no provider named compute2x (did you mean compute2?)",
    )


def test_a_provider_listed_twice_in_a_scale_set_is_refused() -> None:
    text = VALID.replace(
        "    providers: [compute1]\n",
        "    providers:\n      - compute1\n      - { name: compute1, runner: { vcpus: 2 } }\n",
    )
    refused_with(
        text,
        "s.yaml:9:11: scale_sets[0].providers[1]: "
        "provider compute1 is listed twice (first at line 8)",
    )


def test_scale_set_names_equal_ignoring_case_are_refused() -> None:
    text = VALID + "  - name: SMALL\n    max_runners: 1\n    providers: [compute1]\n"
    refused_with(
        text,
        "s.yaml:8:5: scale_sets[1].name: scale set SMALL is the same as small ignoring case "
        "(line 5); GitHub compares names ignoring case",
    )


def test_duplicate_provider_names_are_refused() -> None:
    text = VALID.replace("scale_sets:\n", "  - name: compute1\n    type: fake\nscale_sets:\n")
    refused_with(
        text, "s.yaml:4:5: providers[1].name: provider compute1 is defined twice (first at line 2)"
    )


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "small_one",
            "'small_one' is not valid: letters, digits and '-', starting with a letter or digit",
        ),
        (
            "-small",
            "'-small' is not valid: letters, digits and '-', starting with a letter or digit",
        ),
        (
            "'small one'",
            "'small one' is not valid: letters, digits and '-', starting with a letter or digit",
        ),
        ("a" * 46, f"'{'a' * 46}' is 46 characters; at most 45"),
    ],
)
def test_a_name_that_is_not_a_runner_name_base_is_refused(name: str, message: str) -> None:
    text = VALID.replace("name: small", f"name: {name}").replace("[compute1]", "[compute1]")
    refused_with(text, f"s.yaml:5:5: scale_sets[0].name: {message}")


def test_a_name_of_45_characters_is_accepted() -> None:
    text = VALID.replace("name: small", "name: " + "A1-" * 15)
    assert len(parse_scale_sets(text, "s.yaml").scale_sets[0].name) == 45


def test_a_reconcile_interval_below_5s_is_refused() -> None:
    text = VALID + "timing:\n  reconcile_interval: 4s\n"
    refused_with(text, "s.yaml:9:3: timing.reconcile_interval: is 4s; must be at least 5s")


def test_a_start_timeout_below_30s_is_refused_in_a_scale_set_and_in_timing() -> None:
    text = VALID.replace("    max_runners: 2\n", "    max_runners: 2\n    start_timeout: 29\n")
    text += "timing:\n  start_timeout: 0.5m\n"
    found = problems(text)
    assert "s.yaml:7:5: scale_sets[0].start_timeout: is 29; must be at least 30s" in found
    assert (
        "s.yaml:10:3: timing.start_timeout: is 0.5m; must be at least 30s" not in found
    )  # 30s is fine
    assert len(found) == 1


def test_ages_below_the_start_timeout_are_refused() -> None:
    text = VALID.replace(
        "    max_runners: 2\n",
        "    max_runners: 2\n    start_timeout: 2m\n    max_idle_age: 90s\n    max_age: 3m\n",
    )
    found = problems(text)
    assert found == ["s.yaml:8:5: scale_sets[0].max_idle_age: is 90s; at least start_timeout (2m)"]


def test_ages_are_checked_against_the_timing_default_start_timeout() -> None:
    text = VALID.replace("    max_runners: 2\n", "    max_runners: 2\n    max_age: 4m\n")
    refused_with(text, "s.yaml:7:5: scale_sets[0].max_age: is 4m; at least start_timeout (5m)")


def test_backoff_max_below_backoff_first_and_a_zero_backoff_are_refused() -> None:
    text = VALID + "timing:\n  backoff_first: 30s\n  backoff_max: 20s\n"
    refused_with(
        text,
        "s.yaml:10:3: timing.backoff_max: backoff_max (20s) must be at least backoff_first (30s)",
    )
    text = VALID + "timing:\n  backoff_first: 0s\n"
    refused_with(text, "s.yaml:9:3: timing.backoff_first: must be more than 0s")


def test_a_duration_that_cannot_be_read_is_refused() -> None:
    text = VALID + "timing:\n  left_grace: soon\n"
    refused_with(
        text, "s.yaml:9:3: timing.left_grace: 'soon' is not a duration such as 30s, 2m or 1h30m"
    )


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            "max_runners: 2",
            "max_runners: '2'",
            "s.yaml:6:5: scale_sets[0].max_runners: must be a whole number, not the string '2'",
        ),
        (
            "max_runners: 2",
            "max_runners: 2.5",
            "s.yaml:6:5: scale_sets[0].max_runners: must be a whole number, not the number 2.5",
        ),
        (
            "max_runners: 2",
            "max_runners: [2]",
            "s.yaml:6:5: scale_sets[0].max_runners: must be a whole number, not a list",
        ),
        (
            "providers: [compute1]",
            "providers: compute1",
            "s.yaml:7:5: scale_sets[0].providers: must be a list, not the string 'compute1'",
        ),
        (
            "providers: [compute1]",
            "providers: []",
            "s.yaml:7:5: scale_sets[0].providers: must have at least 1 item",
        ),
        (
            "providers: [compute1]",
            "providers: [[compute1]]",
            "s.yaml:7:17: scale_sets[0].providers[0]: must be a name or a mapping, not a list",
        ),
        (
            "    type: fake\n",
            "    type: fake\n    disabled: 'yes'\n",
            "s.yaml:4:5: providers[0].disabled: must be true or false, not the string 'yes'",
        ),
        (
            "    type: fake\n",
            "    type: fake\n    runner: [1]\n",
            "s.yaml:4:5: providers[0].runner: must be a mapping, not a list",
        ),
        (
            "    type: fake\n",
            "    type: fake\n    refuse: full\n    memory: lots\n",
            "s.yaml:5:5: providers[0].memory: 'lots' is not a size such as 512MiB, 8GiB or 6G",
        ),
        (
            "    max_runners: 2\n",
            "    max_runners: 2\n    placement: packed\n",
            "s.yaml:7:5: scale_sets[0].placement: 'packed' is not one of spread, pack",
        ),
        (
            "    max_runners: 2\n",
            "    max_runners: 2\n    runner_group:\n",
            "s.yaml:7:5: scale_sets[0].runner_group: must be a string, not empty",
        ),
    ],
)
def test_a_value_of_the_wrong_type_is_refused(old: str, new: str, expected: str) -> None:
    assert old in VALID
    refused_with(VALID.replace(old, new), expected)


def test_a_timing_block_that_is_a_list_is_refused() -> None:
    refused_with(VALID + "timing: [30s]\n", "s.yaml:8:1: timing: must be a mapping, not a list")


def test_a_merged_runner_block_with_a_bad_size_is_refused() -> None:
    text = VALID.replace("[compute1]", "[{ name: compute1, runner: { memory: lots } }]")
    refused_with(
        text,
        "s.yaml:7:35: scale_sets[0].providers[0].runner.memory: "
        "'lots' is not a size such as 512MiB, 8GiB or 6G",
    )


def test_input_that_is_not_utf8_is_refused_at_the_bad_byte() -> None:
    data = VALID.encode().replace(b"small", b"sm\xffll")
    with pytest.raises(ConfigError) as caught:
        parse_scale_sets_bytes(data, "s.yaml")
    assert caught.value.problems == ["s.yaml:5:13: is not UTF-8: byte 0xff"]


@pytest.mark.parametrize("text", ["", "\n\n", "# nothing but a comment\n", "---\n"])
def test_an_empty_file_is_refused(text: str) -> None:
    assert problems(text) == ["s.yaml:1:1: the file is empty; it needs providers and scale_sets"]


def test_a_top_level_that_is_not_a_mapping_is_refused() -> None:
    assert problems("- a\n- b\n") == ["s.yaml:1:1: must be a mapping, not a list"]


def test_a_syntax_error_is_refused_with_its_position() -> None:
    found = problems("providers:\n  - name: a\n   type: fake\n")
    assert len(found) == 1 and found[0].startswith("s.yaml:3:")
    assert "YAML syntax" in found[0]


def test_a_control_character_is_refused() -> None:
    found = problems(VALID.replace("small", "sm\x07ll"))
    assert found == ["s.yaml:5:13: character U+0007 is not allowed in YAML"]


def test_two_documents_are_refused() -> None:
    found = problems(VALID + "---\n" + VALID)
    assert len(found) == 1 and "YAML syntax" in found[0]


def test_a_provider_of_another_type_needs_an_address_or_a_command() -> None:
    text = VALID.replace("type: fake", "type: hetzner")
    refused_with(text, "s.yaml:2:5: providers[0]: needs an address or a command")


def test_a_runnerd_provider_needs_an_address_and_says_it_is_a_host_of_its_own() -> None:
    text = VALID.replace("type: fake", "type: runnerd")
    refused_with(
        text,
        "s.yaml:2:5: providers[0]: needs an address: runnerd runs on a host of its own, "
        "reached at its unix:// socket or host:port",
    )


def test_a_provider_with_both_address_and_command_is_refused() -> None:
    text = VALID.replace("type: fake", "type: custom\n    address: h:1\n    command: [p]")
    refused_with(text, "s.yaml:5:5: providers[0].command: set address or command, not both")


def test_tls_on_a_unix_address_is_refused() -> None:
    text = VALID.replace(
        "type: fake",
        "type: runnerd\n    address: unix:///run/r.sock\n    tls: { ca_file: /ca.pem }",
    )
    refused_with(text, "s.yaml:5:5: providers[0].tls: TLS is refused on a unix:// address")


def test_a_gcp_provider_needs_its_project_and_zones() -> None:
    text = VALID.replace("type: fake", "type: gcp\n    command: [gcp-plugin]")
    found = problems(text)
    assert "s.yaml:2:5: providers[0].project: is required for type gcp" in found
    assert "s.yaml:2:5: providers[0].zones: is required for type gcp" in found


def test_a_missing_required_key_is_refused_at_its_mapping() -> None:
    refused_with(
        VALID.replace("    max_runners: 2\n", ""),
        "s.yaml:5:5: scale_sets[0].max_runners: is required",
    )


def test_version_other_than_1_is_refused() -> None:
    refused_with("version: 2\n" + VALID, "s.yaml:1:1: version: must be 1")


def test_a_key_read_as_a_boolean_must_be_quoted() -> None:
    text = VALID.replace("    type: fake\n", "    type: fake\n    runner: { on: 1 }\n")
    refused_with(
        text, "s.yaml:4:15: providers[0].runner: key on is read as the boolean true; quote it"
    )


def test_every_problem_is_reported_at_once_in_file_order() -> None:
    text = """\
providers:
  - name: compute1
    type: fake
    weight: .inf
scale_sets:
  - name: small
    max_runners: 0
    providers: [compute9]
  - name: Small
    max_runners: 10001
    providers: [compute1]
timing:
  reconcile_interval: 1s
"""
    assert problems(text) == [
        "s.yaml:4:5: providers[0].weight: .inf is not a finite number",
        "s.yaml:7:5: scale_sets[0].max_runners: must be at least 1",
        "s.yaml:8:17: scale_sets[0].providers[0]: "
        "no provider named compute9 (did you mean compute1?)",
        "s.yaml:9:5: scale_sets[1].name: scale set Small is the same as small ignoring case "
        "(line 6); GitHub compares names ignoring case",
        "s.yaml:10:5: scale_sets[1].max_runners: must be at most 10000",
        "s.yaml:13:3: timing.reconcile_interval: is 1s; must be at least 5s",
    ]


def test_an_unreadable_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_scale_sets(tmp_path / "missing.yaml")
    assert caught.value.problems == [
        f"{tmp_path / 'missing.yaml'}:1:1: cannot be read: No such file or directory"
    ]


def test_a_unix_socket_path_longer_than_the_kernel_allows_is_refused_naming_the_key() -> None:
    path = "/run/" + "d" * 98 + ".sock"  # 108 bytes: one past the kernel's 107
    text = VALID.replace("type: fake", f"type: runnerd\n    address: unix://{path}")
    refused_with(
        text,
        "s.yaml:4:5: providers[0].address: the socket path is 108 bytes long; the kernel "
        "allows at most 107: use a shorter path",
    )
    at_the_limit = "/run/" + "d" * 97 + ".sock"  # 107 bytes
    fits = VALID.replace("type: fake", f"type: runnerd\n    address: unix://{at_the_limit}")
    assert parse_scale_sets(fits, "s.yaml").providers[0].address == f"unix://{at_the_limit}"
