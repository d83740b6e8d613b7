"""Good scale_sets.yaml: the documented examples, defaults, anchors, merge keys, runner merging."""

from __future__ import annotations

from pathlib import Path

from rungar.config.loader import load_scale_sets, parse_scale_sets
from rungar.config.model import Placement, Timing

ROOT = Path(__file__).resolve().parents[2]
MINIMAL = (
    "providers: [{ name: p, type: fake }]\n"
    "scale_sets: [{ name: a, max_runners: 1, providers: [p] }]\n"
)

PROVIDERS = """\
providers:
  - { name: compute1, type: runnerd, address: unix:///run/runnerd/compute1.sock }
  - { name: compute2, type: runnerd, address: compute2:7443 }
  - name: gcp
    type: gcp
    command: [rungar-provider-gcp]
    project: acme
    zones: [europe-west1-b]
    max_runners: 20
"""

# Trying providers in order: one host first, then the cloud.
PACK_EXAMPLE = """\
scale_sets:
  - name: rungar-c4-m8
    max_runners: 10
    placement: pack
    providers:
      - { name: compute1, runner: &c4-m8 { vcpus: 4, memory: 8GiB } }
      - { name: compute2, runner: *c4-m8 }
      - { name: gcp, runner: { machine_type: e2-custom-4-8192 } }
"""

# Priority between scale sets.
PRIORITY_EXAMPLE = """\
scale_sets:
  - name: rungar-c2-m4
    max_runners: 12
    providers:
      - { name: compute1, runner: &c2-m4 { vcpus: 2, memory: 4GiB } }
      - { name: compute2, runner: *c2-m4 }
  - name: rungar-c8-m16
    max_runners: 2
    priority: 10
    providers:
      - { name: compute1, runner: &c8-m16 { vcpus: 8, memory: 16GiB } }
      - { name: compute2, runner: *c8-m16 }
"""

# Limits, with the project and zones gcp needs: no address
# or command, as gcp starts its shipped plugin.
LIMIT_EXAMPLE = """\
providers:
  - name: gcp
    type: gcp
    max_runners: 20
    project: acme
    zones: [europe-west1-b]
"""


def test_a_pack_scale_set_loads_with_each_providers_runner_block() -> None:
    config = parse_scale_sets(PROVIDERS + PACK_EXAMPLE, "s.yaml")
    scale_set = config.scale_set("rungar-c4-m8")
    assert scale_set.placement is Placement.PACK
    assert scale_set.max_runners == 10
    assert scale_set.provider_names == ("compute1", "compute2", "gcp")
    assert scale_set.providers[0].runner == {"vcpus": 4, "memory": "8GiB"}
    assert scale_set.providers[1].runner == {"vcpus": 4, "memory": "8GiB"}
    assert scale_set.providers[2].runner == {"machine_type": "e2-custom-4-8192"}


def test_two_scale_sets_of_different_priorities_load() -> None:
    config = parse_scale_sets(PROVIDERS + PRIORITY_EXAMPLE, "s.yaml")
    small, large = config.scale_sets
    assert (small.name, small.priority, small.max_runners) == ("rungar-c2-m4", 0, 12)
    assert (large.name, large.priority, large.max_runners) == ("rungar-c8-m16", 10, 2)
    assert large.providers[1].runner == {"vcpus": 8, "memory": "16GiB"}


def test_a_provider_limit_loads_with_its_options() -> None:
    text = LIMIT_EXAMPLE + "scale_sets:\n  - { name: a, max_runners: 1, providers: [gcp] }\n"
    provider = parse_scale_sets(text, "s.yaml").provider("gcp")
    assert provider.max_runners == 20
    assert provider.options == {"project": "acme", "zones": ["europe-west1-b"]}
    assert (provider.address, provider.command) == ("", ())


def test_the_committed_example_is_valid_with_its_three_scale_sets() -> None:
    config = load_scale_sets(ROOT / "config" / "scale_sets.example.yaml")
    assert [p.name for p in config.providers] == ["compute1", "compute2", "gcp"]
    assert [s.name for s in config.scale_sets] == ["rungar-c2-m4", "rungar-c4-m8", "rungar-c8-m16"]
    c4 = config.scale_set("rungar-c4-m8")
    assert c4.placement is Placement.PACK
    assert c4.providers[2].runner["machine_type"] == "e2-custom-4-8192"
    assert c4.providers[0].runner["image"].startswith("ghcr.io/")  # laid over the <<-merged base
    assert config.scale_set("rungar-c8-m16").priority == 10
    compute2 = config.provider("compute2")
    assert compute2.options["tls"]["ca_file"] == "/etc/rungar/tls/ca.pem"
    assert compute2.options["token_file"] == "/etc/rungar/runnerd-compute2.token"
    assert (compute2.type, compute2.timeout) == ("runnerd", 10.0)  # from the << merge


def test_defaults_are_filled() -> None:
    text = """\
providers:
  - { name: p, type: fake }
scale_sets:
  - { name: s, max_runners: 3, providers: [p] }
"""
    config = parse_scale_sets(text, "s.yaml")
    provider, scale_set = config.providers[0], config.scale_sets[0]
    assert (provider.weight, provider.max_runners, provider.disabled) == (1.0, 0, False)
    assert (provider.address, provider.command, provider.timeout) == ("", (), 0.0)
    assert provider.runner == {} and provider.options == {}
    assert scale_set.labels == () and scale_set.runner_group == "Default"
    assert (scale_set.min_runners, scale_set.priority, scale_set.paused) == (0, 0, False)
    assert scale_set.placement is Placement.SPREAD
    assert scale_set.start_timeout == 300.0
    assert scale_set.max_idle_age is None and scale_set.max_age is None
    assert config.timing == Timing()
    assert config.timing.hold_duration == 60.0
    assert config.path == "s.yaml"


def test_a_scale_sets_start_timeout_defaults_to_the_timing_block() -> None:
    text = """\
providers: [{ name: p, type: fake }]
scale_sets:
  - { name: a, max_runners: 3, providers: [p] }
  - { name: b, max_runners: 3, providers: [p], start_timeout: 45s }
timing: { start_timeout: 2m, reconcile_interval: 10, hold: 1m30s }
"""
    config = parse_scale_sets(text, "s.yaml")
    assert config.scale_set("a").start_timeout == 120.0
    assert config.scale_set("b").start_timeout == 45.0
    assert config.timing.reconcile_interval == 10.0
    assert config.timing.hold_duration == 90.0


def test_every_timing_field_can_be_set() -> None:
    from dataclasses import fields

    # Durations are written with a unit; a count (crash_backoff_after) as a whole number.
    counts = {f.name for f in fields(Timing) if isinstance(getattr(Timing(), f.name), int)}
    names = [f.name for f in fields(Timing)]
    text = MINIMAL + "timing:\n"
    for i, name in enumerate(names):
        text += f"  {name}: {i + 1}\n" if name in counts else f"  {name}: {600 + i}s\n"
    timing = parse_scale_sets(text, "s.yaml").timing
    assert [getattr(timing, name) for name in names] == [
        i + 1 if name in counts else 600.0 + i for i, name in enumerate(names)
    ]


def test_every_key_of_a_scale_set_is_read() -> None:
    text = """\
providers: [{ name: p, type: fake, weight: 2.5, max_runners: 7, disabled: true, timeout: 3s }]
scale_sets:
  - name: Big-1
    labels: [linux, "on"]
    runner_group: ci
    min_runners: 1
    max_runners: 4
    priority: -3
    placement: pack
    providers: [p]
    start_timeout: 1m
    max_idle_age: 1h
    max_age: 1d
    paused: true
"""
    config = parse_scale_sets(text, "s.yaml")
    s = config.scale_sets[0]
    assert (s.name, s.labels, s.runner_group, s.min_runners, s.max_runners) == (
        "Big-1",
        ("linux", "on"),
        "ci",
        1,
        4,
    )
    assert (s.priority, s.placement, s.start_timeout, s.max_idle_age, s.max_age, s.paused) == (
        -3,
        Placement.PACK,
        60.0,
        3600.0,
        86400.0,
        True,
    )
    p = config.providers[0]
    assert (p.weight, p.max_runners, p.disabled, p.timeout) == (2.5, 7, True, 3.0)


def test_fake_provider_keys_are_read_into_options() -> None:
    text = """\
providers:
  - { name: p, type: fake, vcpus: 16, memory: 32GiB, latency: 250ms, refuse: full,
      unanswered: true }
scale_sets: [{ name: a, max_runners: 1, providers: [p] }]
"""
    options = parse_scale_sets(text, "s.yaml").providers[0].options
    assert options == {
        "vcpus": 16,
        "memory": 32 * 1024**3,
        "latency": 0.25,
        "refuse": "full",
        "unanswered": True,
    }


def test_a_provider_of_another_type_keeps_any_key_as_its_own() -> None:
    text = """\
providers:
  - { name: p, type: proxmox, command: [px], url: "https://pve:8006", nodes: [a, b] }
scale_sets: [{ name: a, max_runners: 1, providers: [p] }]
"""
    provider = parse_scale_sets(text, "s.yaml").providers[0]
    assert provider.options == {"url": "https://pve:8006", "nodes": ["a", "b"]}


def test_merge_keys_and_anchors_build_providers() -> None:
    text = """\
x-host: &host
  type: runnerd
  weight: 2
  runner: { image: runner:1, disk: 20GiB }
x-tcp: &tcp
  address: unused:1
  weight: 3
providers:
  - <<: *host
    name: compute1
    address: unix:///run/r.sock
  - <<: [*host, *tcp]
    name: compute2
    weight: 5
  - <<: [*tcp, *host]
    name: compute3
scale_sets: [{ name: a, max_runners: 1, providers: [compute1, compute2, compute3] }]
"""
    config = parse_scale_sets(text, "s.yaml")
    one, two, three = config.providers
    assert (one.type, one.weight, one.address) == ("runnerd", 2.0, "unix:///run/r.sock")
    assert one.runner == {"image": "runner:1", "disk": "20GiB"}
    assert (two.weight, two.address) == (5.0, "unused:1")  # its own key wins over merged ones
    assert three.weight == 3.0  # of several merged mappings, the first wins


def test_a_scale_sets_runner_block_is_laid_over_the_providers() -> None:
    text = """\
providers:
  - name: p
    type: fake
    runner:
      image: base:1
      env: { A: "1", B: "2", NESTED: { X: x, Y: y } }
      mounts: [{ target: /a }, { target: /b }]
      disk: 20GiB
scale_sets:
  - name: a
    max_runners: 1
    providers:
      - name: p
        runner:
          vcpus: 2
          env: { B: "3", C: "4", NESTED: { Y: null, Z: z } }
          mounts: [{ target: /c }]
          disk: null
  - { name: b, max_runners: 1, providers: [p] }
"""
    config = parse_scale_sets(text, "s.yaml")
    merged = config.scale_set("a").providers[0].runner
    assert merged == {
        "image": "base:1",
        "env": {"A": "1", "B": "3", "C": "4", "NESTED": {"X": "x", "Z": "z"}},
        "mounts": [{"target": "/c"}],
        "vcpus": 2,
    }
    # the provider's block is untouched, and a scale set naming it alone gets it whole
    assert config.provider("p").runner["disk"] == "20GiB"
    assert config.scale_set("b").providers[0].runner == config.provider("p").runner
    assert config.scale_set("b").providers[0].runner is not config.provider("p").runner


def test_an_x_prefixed_top_level_key_holds_anchors_and_is_ignored() -> None:
    text = """\
x-sizes:
  small: &small { vcpus: 2, memory: 4GiB }
providers: [{ name: p, type: fake }]
scale_sets: [{ name: a, max_runners: 1, providers: [{ name: p, runner: *small }] }]
"""
    config = parse_scale_sets(text, "s.yaml")
    assert config.scale_sets[0].providers[0].runner == {"vcpus": 2, "memory": "4GiB"}


def test_a_utf8_bom_and_a_version_of_1_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    text = "version: 1\n" + MINIMAL
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert load_scale_sets(path).path == str(path)
