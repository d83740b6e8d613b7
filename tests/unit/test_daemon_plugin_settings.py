"""What the daemon hands a plugin it starts: the provider's type keys as written in
scale_sets.yaml, its name and the installation, and nothing of Rungar's own keys."""

from __future__ import annotations

from typing import Any

from rungar.clock import SystemClock
from rungar.config.loader import parse_scale_sets
from rungar.daemon.providers import PluginProvider, make_provider

SCALE_SETS = """
version: 1
providers:
  - name: gcp-eu
    type: gcp
    command: [rungar-provider-gcp]
    weight: 0.5
    max_runners: 20
    timeout: 20s
    project: acme-ci
    zones: [europe-west1-b, europe-west1-c]
    external_ip: false
    impersonate_service_account: rungar@acme-ci.iam.gserviceaccount.com
    runner: { image: projects/acme-ci/global/images/family/runner }
  - name: hetzner
    type: hetzner
    command: [rungar-provider-hetzner]
    location: fsn1
  - name: remote
    type: aws
    address: unix:///run/rungar/aws.sock
    region: eu-west-1
scale_sets:
  - name: ci
    max_runners: 4
    providers: [gcp-eu, hetzner, remote]
"""


def handed(name: str, installation: str = "gh-0123456789ab") -> dict[str, Any] | None:
    config = {p.name: p for p in parse_scale_sets(SCALE_SETS, "scale_sets.yaml").providers}
    plugins: list[Any] = []
    provider = make_provider(config[name], SystemClock(), plugins, installation)
    if not isinstance(provider, PluginProvider):
        return None
    assert plugins == [provider.plugin]
    return provider.plugin.settings


def test_a_plugin_is_handed_its_type_keys_its_name_and_the_installation() -> None:
    assert handed("gcp-eu") == {
        "project": "acme-ci",
        "zones": ["europe-west1-b", "europe-west1-c"],
        "external_ip": False,
        "impersonate_service_account": "rungar@acme-ci.iam.gserviceaccount.com",
        "name": "gcp-eu",
        "installation": "gh-0123456789ab",
    }


def test_a_third_party_plugin_is_handed_its_own_keys_as_written() -> None:
    assert handed("hetzner") == {
        "location": "fsn1",
        "name": "hetzner",
        "installation": "gh-0123456789ab",
    }


def test_an_unknown_installation_is_left_to_the_plugins_own_file() -> None:
    settings = handed("gcp-eu", installation="")
    assert settings is not None and "installation" not in settings


def test_a_provider_rungar_only_connects_to_is_handed_nothing() -> None:
    assert handed("remote") is None
