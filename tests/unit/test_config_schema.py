"""The committed JSON Schema is the one the definitions render, and agrees with the loader."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from rungar.config.schema import json_schema, render_json

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_FILE = ROOT / "config" / "scale_sets.schema.json"
EXAMPLE_FILE = ROOT / "config" / "scale_sets.example.yaml"


def test_the_committed_schema_file_equals_the_generated_schema() -> None:
    committed = SCHEMA_FILE.read_text(encoding="utf-8")
    assert json.loads(committed) == json_schema(), (
        "regenerate: python -m rungar.config.schema > config/scale_sets.schema.json"
    )
    assert committed == render_json()


def test_the_schema_lists_every_timing_field_with_its_default() -> None:
    timing = json_schema()["properties"]["timing"]["properties"]
    assert timing["reconcile_interval"]["default"] == 30.0
    assert timing["backoff_first"]["default"] == 15.0
    assert timing["backoff_max"]["default"] == 120.0
    assert timing["reconcile_interval"]["anyOf"][0] == {"type": "number", "minimum": 5.0}


def _validator() -> Any:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_example_validates_against_the_json_schema() -> None:
    document = yaml.safe_load(EXAMPLE_FILE.read_text(encoding="utf-8"))
    assert list(_validator().iter_errors(document)) == []


def test_the_json_schema_refuses_what_the_loader_refuses() -> None:
    validator = _validator()
    document = yaml.safe_load(EXAMPLE_FILE.read_text(encoding="utf-8"))
    document["providers"][0]["zones"] = ["a"]  # a gcp key on a runnerd provider
    document["providers"][2]["colour"] = "blue"  # an unknown key on a gcp provider
    document["scale_sets"][0]["max_runners"] = 0
    document["scale_sets"][1]["name"] = "bad_name"
    document["timing"]["reconcile_interval"] = 4
    assert len(list(validator.iter_errors(document))) == 5


def test_a_provider_of_an_unknown_type_may_have_any_key_in_the_json_schema() -> None:
    validator = _validator()
    document = yaml.safe_load(EXAMPLE_FILE.read_text(encoding="utf-8"))
    document["providers"].append({"name": "pve", "type": "proxmox", "address": "pve:1", "url": "x"})
    assert list(validator.iter_errors(document)) == []
