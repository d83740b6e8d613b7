"""``dashboard:`` and ``usage:`` in scale_sets.yaml, and a provider's ``price_per_hour``.

The fleet page follows the provider channel's rule: plain HTTP on loopback only; beyond it TLS
and a token or client certificates, each refusal at the key that causes it (FILE:LINE:COL).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rungar.config.loader import parse_scale_sets
from rungar.errors import ConfigError

BASE = """\
providers:
  - {name: host, type: fake, price_per_hour: 0.25}
scale_sets:
  - {name: linux, max_runners: 2, providers: [host]}
"""


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_scale_sets(text, "/etc/rungar/s.yaml")
    return caught.value.problems


def test_without_a_dashboard_block_there_is_no_fleet_page_and_usage_is_kept_90_days() -> None:
    config = parse_scale_sets(BASE, "/etc/rungar/s.yaml")
    assert config.dashboard.listen == ""
    assert config.usage_retention == 90 * 86400
    assert config.providers[0].price_per_hour == 0.25


@pytest.mark.parametrize("listen", ["127.0.0.1:8180", "localhost:8180", "[::1]:0", "127.8.0.1:1"])
def test_a_loopback_dashboard_needs_nothing_more(listen: str) -> None:
    text = BASE + f"dashboard: {{listen: '{listen}', refresh: 5s}}\nusage: {{retention: 30d}}\n"
    config = parse_scale_sets(text, "/etc/rungar/s.yaml")
    assert (config.dashboard.listen, config.dashboard.refresh) == (listen, 5.0)
    assert config.usage_retention == 30 * 86400


def test_beyond_loopback_without_tls_is_refused_at_the_listen_key() -> None:
    found = problems(BASE + "dashboard:\n  listen: 0.0.0.0:8180\n")
    assert found == [
        "/etc/rungar/s.yaml:6:3: dashboard.listen: 0.0.0.0:8180 is beyond loopback: the fleet "
        "page there needs tls.cert_file and tls.key_file, and token_file or tls.client_ca_file"
    ]


def test_beyond_loopback_with_tls_but_no_token_nor_client_ca_is_refused() -> None:
    text = BASE + "dashboard:\n  listen: ':8180'\n  tls: {cert_file: c.pem, key_file: k.pem}\n"
    [found] = problems(text)
    assert found.startswith("/etc/rungar/s.yaml:6:3: dashboard.listen: :8180 is beyond loopback")
    assert "needs token_file or tls.client_ca_file" in found


@pytest.mark.parametrize(
    "access",
    [
        "token_file: dashboard.token",
        "tls: {cert_file: c.pem, key_file: k.pem, client_ca_file: ca.pem}",
    ],
)
def test_beyond_loopback_tls_with_a_token_or_client_certificates_is_accepted(access: str) -> None:
    tls = "" if access.startswith("tls") else "  tls: {cert_file: c.pem, key_file: k.pem}\n"
    text = BASE + f"dashboard:\n  listen: 10.0.0.5:8180\n{tls}  {access}\n"
    config = parse_scale_sets(text, "/etc/rungar/s.yaml")
    assert config.dashboard.cert_file == "/etc/rungar/c.pem"  # next to the file
    assert config.dashboard.token_file in ("", "/etc/rungar/dashboard.token")


def test_a_certificate_without_its_key_and_a_bad_address_are_each_named() -> None:
    found = problems(
        BASE + "dashboard:\n  listen: 'http://x'\n  tls: {cert_file: c.pem}\n"
        "usage: {retention: 10m}\n"
    )
    assert any("dashboard.listen: 'http://x' is not valid: host:port" in p for p in found)
    assert any(p.endswith("dashboard.tls.key_file: is needed with cert_file") for p in found)
    assert any("usage.retention: is 10m; must be at least 1h" in p for p in found)


def test_a_price_per_hour_must_be_positive() -> None:
    found = problems(BASE.replace("price_per_hour: 0.25", "price_per_hour: -1"))
    assert found == [
        "/etc/rungar/s.yaml:2:30: providers[0].price_per_hour: must be positive, not -1"
    ]


def test_applying_a_changed_dashboard_says_it_waits_for_a_restart() -> None:
    from rungar.daemon.control import diff_configs

    old = parse_scale_sets(BASE, "/etc/rungar/s.yaml")
    new = parse_scale_sets(
        BASE + "dashboard: {listen: '127.0.0.1:8180'}\nusage: {retention: 30d}\n",
        "/etc/rungar/s.yaml",
    )
    assert diff_configs(old, new) == [
        "~ dashboard (takes effect when the daemon restarts)",
        "~ usage retention",
    ]
    assert diff_configs(old, old) == []


def test_validate_verbose_lists_the_fleet_pages_files_as_they_will_be_opened(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rungar.cli.main import main

    path = tmp_path / "s.yaml"
    path.write_text(
        "version: 1\n" + BASE + "dashboard:\n  listen: 10.0.0.5:8180\n"
        "  tls: {cert_file: c.pem, key_file: k.pem}\n  token_file: secrets/dashboard.token\n"
    )
    assert main(["validate", "--verbose", str(path)]) == 0
    listed = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    assert ["dashboard.tls.cert_file", f"{tmp_path}/c.pem"] in listed
    assert ["dashboard.token_file", f"{tmp_path}/secrets/dashboard.token"] in listed


def test_a_dry_run_names_each_changed_key_by_its_path_with_its_values_in_full() -> None:
    from rungar.daemon.control import diff_configs

    text = """version: 1
providers:
  - {name: host1, type: fake}
  - {name: host2, type: fake}
scale_sets:
  - name: demo-small
    max_runners: 4
    providers:
      - {name: host1, runner: {memory: 100M, image: ghcr.io/actions/actions-runner:2.328.0}}
      - {name: host2}
"""
    changed = text.replace("- {name: host2}", "- {name: host2, runner: {memory: 200M}}")
    changed = changed.replace("actions-runner:2.328.0", "actions-runner:2.329.0")
    old = parse_scale_sets(text, "/etc/rungar/s.yaml")
    new = parse_scale_sets(changed, "/etc/rungar/s.yaml")
    assert diff_configs(old, new) == [
        "~ scale_sets[demo-small].providers[host1].runner.image: "
        "ghcr.io/actions/actions-runner:2.328.0 -> ghcr.io/actions/actions-runner:2.329.0",
        "~ scale_sets[demo-small].providers[host2].runner.memory: (unset) -> 200M",
    ]


def test_a_runnerd_runner_key_typo_and_a_provider_type_typo_are_refused_where_written() -> None:
    text = """version: 1
providers:
  - {name: host1, type: runerd, address: unix:///run/h1.sock}
  - name: host2
    type: runnerd
    address: unix:///run/h2.sock
    runner:
      memroy: 200M
scale_sets:
  - name: demo-small
    max_runners: 2
    providers:
      - name: host2
        runner: {profle: small}
"""
    assert problems(text) == [
        "/etc/rungar/s.yaml:3:19: providers[0].type: runerd is not a provider type Rungar "
        "knows; did you mean runnerd?",
        "/etc/rungar/s.yaml:8:7: providers[1].runner.memroy: not a runner key provider type "
        "runnerd knows; did you mean memory?",
        "/etc/rungar/s.yaml:14:18: scale_sets[0].providers[0].runner.profle: not a runner key "
        "provider type runnerd knows; did you mean profile?",
    ]


def test_the_runner_keys_rungar_checks_offline_are_the_cloud_plugins_own() -> None:
    from rungar_aws.settings import RUNNER_KEYS as AWS
    from rungar_gcp.settings import RUNNER_KEYS as GCP

    from rungar.config.schema import RUNNER_KEYS
    from rungar.model.runner_block import TYPED_KEYS

    assert set(RUNNER_KEYS["gcp"]) == GCP | set(TYPED_KEYS)
    assert set(RUNNER_KEYS["aws"]) == AWS | set(TYPED_KEYS)
    text = """version: 1
providers:
  - {name: gcp, type: gcp, project: acme, zones: [europe-west1-b], runner: {machine_typ: e2-small}}
scale_sets:
  - {name: linux, max_runners: 2, providers: [gcp]}
"""
    assert problems(text) == [
        "/etc/rungar/s.yaml:3:77: providers[0].runner.machine_typ: not a runner key provider "
        "type gcp knows; did you mean machine_type?"
    ]
