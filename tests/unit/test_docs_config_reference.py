"""The configuration reference is the generator's output, and covers every key it should."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from rungar.config import schema
from rungar.config.model import Timing

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "gen_config_reference.py"


def _load_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_config_reference", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = _load_tool()


def _keys(text: str) -> set[str]:
    """The keys of every reference table row: the first cell, between backticks."""
    return set(re.findall(r"^\| `([^`]+)` \|", text, flags=re.MULTILINE))


def test_the_committed_reference_equals_the_generators_output() -> None:
    committed = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert committed == gen.render_reference(), "run: python tools/gen_config_reference.py"


def test_the_scale_sets_guide_carries_the_generated_tables_unchanged() -> None:
    guide = (ROOT / "docs" / "scale-sets.md").read_text(encoding="utf-8")
    assert gen.BEGIN in guide and gen.END in guide
    assert guide == gen.splice(guide, gen.render_guide_block()), (
        "run: python tools/gen_config_reference.py"
    )


def test_the_check_mode_passes_on_the_committed_files() -> None:
    done = subprocess.run(
        [sys.executable, str(TOOL), "--check"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr


def test_an_edited_reference_is_reported_as_out_of_date(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = tmp_path / "configuration.md"
    doc.write_text(gen.render_reference().replace("`30s`", "`45s`", 1), encoding="utf-8")
    guide = tmp_path / "scale-sets.md"
    guide.write_text(
        (ROOT / "docs" / "scale-sets.md").read_text(encoding="utf-8"), encoding="utf-8"
    )
    monkeypatch.setattr(gen, "ROOT", tmp_path)
    monkeypatch.setattr(gen, "DOC", doc)
    monkeypatch.setattr(gen, "GUIDE", guide)
    assert gen.main(["--check"]) == 1
    assert gen.main([]) == 0
    assert doc.read_text(encoding="utf-8") == gen.render_reference()
    assert gen.main(["--check"]) == 0


def test_every_key_of_the_schema_is_in_the_reference() -> None:
    keys = _keys(gen.render_reference())
    expected = {f.name for f in schema.file_obj().fields}
    expected |= {f.name for f in schema.PROVIDER_COMMON}
    expected |= {f.name for f in schema.SCALE_SET.fields}
    expected |= {f"timing.{f.name}" for f in dataclasses.fields(Timing)}
    for fields in schema.PROVIDER_TYPES.values():
        expected |= {f.name for f in fields}
    expected |= {"tls.ca_file", "tls.cert_file", "tls.key_file", "tls.server_name"}
    assert expected <= keys, sorted(expected - keys)


def test_every_timing_key_shows_its_default_as_a_duration() -> None:
    rows = {row[0]: row for row in gen.timing_rows()}
    assert rows["`timing.reconcile_interval`"][2] == "`30s`"
    assert rows["`timing.backoff_first`"][2] == "`15s`"
    assert rows["`timing.backoff_max`"][2] == "`2m`"
    assert rows["`timing.unreachable_grace`"][2] == "`5m`"
    assert rows["`timing.hold`"][2] == "unset"
    assert "2 × reconcile_interval" in rows["`timing.hold`"][3]


def test_every_daemon_setting_is_documented_with_its_default() -> None:
    rows = {row[0].strip("`"): row for row in gen.settings_rows()}
    assert set(rows) == set(gen.SETTINGS_NOTES)
    assert rows["socket"][2] == "`/run/rungar/rungar.sock`"
    assert rows["socket_mode"][2] == "`0660`"
    assert rows["max_parallel_creates"][1] == "integer ≥ 1, ≤ 4,096"
    assert rows["github.url"][2] == "**required**"


def test_a_setting_without_a_note_stops_the_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    notes = dict(gen.SETTINGS_NOTES)
    del notes["socket_mode"]
    monkeypatch.setattr(gen, "SETTINGS_NOTES", notes)
    with pytest.raises(KeyError, match="socket_mode"):
        gen.render_reference()


def test_a_note_for_a_setting_that_is_gone_stops_the_generator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(gen, "SETTINGS_NOTES", {**gen.SETTINGS_NOTES, "gone": "No longer read."})
    with pytest.raises(KeyError, match="gone"):
        gen.render_reference()


def test_a_pipe_in_a_cell_does_not_split_the_table_row() -> None:
    line = gen.table([("`placement`", "`spread` | `pack`", "`spread`", "a | b")])[2]
    assert line == "| `placement` | `spread` \\| `pack` | `spread` | a \\| b |"


def test_a_guide_without_the_markers_is_refused() -> None:
    with pytest.raises(ValueError, match="markers"):
        gen.splice("# Scale sets\n", gen.render_guide_block())
