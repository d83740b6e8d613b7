"""Random damage to a valid scale_sets.yaml never raises anything but ConfigError."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rungar.config.loader import parse_scale_sets, parse_scale_sets_bytes
from rungar.errors import ConfigError

EXAMPLE = (Path(__file__).resolve().parents[2] / "config" / "scale_sets.example.yaml").read_text()
LINES = EXAMPLE.splitlines(keepends=True)
# Characters YAML gives meaning to, plus a few that are plain, non-ASCII or not allowed at all.
ALPHABET = ":-[]{},&*!|>'\"#%@`?<=~ \n\t0123456789.abcxyzéñ\x00\x07\ufeff"
TOKENS = [
    "no",
    "yes",
    "~",
    "null",
    ".nan",
    "-.inf",
    "1e400",
    "0x1f",
    "0o17",
    "1:30",
    "2024-01-01",
    "!!python/object:os.system",
    "!!binary",
    "!!set",
    "!!omap",
    "!custom",
    "&a",
    "*a",
    "*b",
    "<<",
    "<<: *a",
    "? ",
    "{",
    "}",
    "[",
    "]",
    "--- ",
    "...",
    "%YAML 1.1\n",
    '"\\x"',
    "'",
    "10001",
    "-1",
    "0",
    "30s",
    "4s",
    "spread",
    "pack",
    "fake",
    "gcp",
    "runnerd",
    "x-a: &a {}\n",
]


@st.composite
def damaged(draw: st.DrawFn) -> str:
    lines = list(LINES)
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["delete", "duplicate", "swap", "chars", "token", "cut"]))
        i = draw(st.integers(0, len(lines) - 1))
        j = draw(st.integers(0, len(lines) - 1))
        line = lines[i]
        pos = draw(st.integers(0, len(line)))
        if op == "delete":
            del lines[i]
        elif op == "duplicate":
            lines.insert(j, line)
        elif op == "swap":
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "chars":
            lines[i] = line[:pos] + draw(st.text(ALPHABET, max_size=4)) + line[pos:]
        elif op == "token":
            lines[i] = line[:pos] + draw(st.sampled_from(TOKENS)) + line[pos:]
        else:
            lines[i] = line[:pos] + line[pos + draw(st.integers(1, 8)) :]
        if not lines:
            break
    return "".join(lines)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged())
def test_damaged_text_loads_or_raises_config_error(text: str) -> None:
    try:
        parse_scale_sets(text, "s.yaml")
    except ConfigError as e:
        assert e.problems
        assert all(p.startswith("s.yaml:") for p in e.problems)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=64), st.integers(0, len(EXAMPLE)))
def test_damaged_bytes_load_or_raise_config_error(junk: bytes, pos: int) -> None:
    data = EXAMPLE.encode()
    try:
        parse_scale_sets_bytes(data[:pos] + junk + data[pos:], "s.yaml")
    except ConfigError as e:
        assert e.problems
