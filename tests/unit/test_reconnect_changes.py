"""Which edits of a provider entry ``rungar apply`` reconnects for (rungar/daemon/reconnect.py)."""

from __future__ import annotations

from dataclasses import replace

from rungar.config.model import ProviderConfig
from rungar.daemon.reconnect import connection_changes, reconnect_line, undeclared_runner_keys
from rungar.model.machine import ProviderInfo

REMOTE = ProviderConfig(
    "compute1",
    "runnerd",
    address="compute1.example.internal:7443",
    options={"tls": {"ca_file": "/etc/ca.pem"}, "token_file": "/etc/token"},
)
PLUGIN = ProviderConfig("cloud", "gcp", options={"project": "p1", "zone": "europe-west1-b"})


def test_a_changed_address_tls_or_token_file_needs_a_new_connection() -> None:
    moved = replace(REMOTE, address="compute1b.example.internal:7443")
    assert connection_changes(REMOTE, moved) == ["address"]
    options = {"tls": {"ca_file": "/etc/new-ca.pem"}, "token_file": "/etc/token2"}
    assert connection_changes(REMOTE, replace(REMOTE, options=options)) == ["tls", "token_file"]


def test_limits_and_runner_blocks_are_taken_live_without_reconnecting() -> None:
    edited = replace(REMOTE, weight=2.0, max_runners=3, timeout=5.0, runner={"vcpus": 4})
    assert connection_changes(REMOTE, edited) == []


def test_a_key_handed_to_a_plugin_restarts_it_but_not_on_an_addressed_provider() -> None:
    rezoned = replace(PLUGIN, options={"project": "p1", "zone": "us-east1-b"})
    assert connection_changes(PLUGIN, rezoned) == ["zone"]
    assert connection_changes(PLUGIN, replace(PLUGIN, command=("./bin/gcp",))) == ["command"]
    # runnerd's own keys are read by runnerd, not handed over at connect time
    profiled = replace(REMOTE, options={**REMOTE.options, "profile": "big"})
    assert connection_changes(REMOTE, profiled) == []


def test_a_provider_served_in_process_never_reconnects() -> None:
    fake = ProviderConfig("f", "fake", options={"vcpus": 4})
    assert connection_changes(fake, replace(fake, options={"vcpus": 8})) == []


def test_the_summary_line_names_what_changed() -> None:
    assert reconnect_line("compute1", ["address", "tls"]) == (
        "~ provider compute1: reconnecting (address, tls changed)"
    )


def test_a_plugins_undeclared_runner_key_is_named_with_the_closest_declared_one() -> None:
    info = ProviderInfo("acme1", "acme", "1", ("vcpus", "memory", "zone", "feature:job-hints"))
    runner = {"vcpus": 2, "zonee": "z1", "flavour": "x", "memroy": "1GiB"}
    # memroy was refused by the plugin's own ValidateRunner already: not told twice.
    assert undeclared_runner_keys(runner, info, "acme1", ["memroy: not a key I know"]) == [
        "zonee: not a runner key provider acme1 (acme) declares in its Info; did you mean zone?",
        "flavour: not a runner key provider acme1 (acme) declares in its Info; it declares "
        "memory, vcpus, zone",
    ]


def test_a_plugin_that_declares_no_runner_keys_has_none_refused() -> None:
    for capabilities in ((), ("feature:job-hints",)):
        info = ProviderInfo("acme1", "acme", "1", capabilities)
        assert undeclared_runner_keys({"anything": 1}, info, "acme1", []) == []
