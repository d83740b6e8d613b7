"""Rungar's machine labels as GCP labels, and label selectors as GCE list filters (pure).

GCP label keys must match ``[a-z][a-z0-9_-]{0,62}`` and values ``[a-z0-9_-]{0,63}``
by GCP's rules. Keys are mapped by lower-casing and turning every other
character into ``_`` (``rungar.sh/scale-set`` → ``rungar_sh_scale-set``, so a key
stays readable); a value GCP does not allow is replaced by ``h-`` and a hash of it. The
exact labels travel in the ``rungar-labels`` metadata item as JSON, which is what ``List``
reads back; the GCP labels exist so the cloud can filter.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping

LABELS_METADATA_KEY = "rungar-labels"
JIT_METADATA_KEY = "rungar-jit-config"
REQUEST_METADATA_KEY = "rungar-request-id"
NAME_METADATA_KEY = "rungar-runner-name"  # the runner's name as given; instance names are lower
MAX_LABELS = 64

_KEY_OK = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_VALUE_OK = re.compile(r"^[a-z0-9_-]{0,63}$")
_KEY_BAD_CHARS = re.compile(r"[^a-z0-9_-]")
_INSTANCE_NAME_OK = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")


def _digest(text: str, length: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def encode_key(key: str) -> str:
    """A GCP label key for ``key``; deterministic, so selectors encode the same way."""
    if _KEY_OK.match(key):
        return key
    out = _KEY_BAD_CHARS.sub("_", key.lower())
    if not out or not out[0].isalpha():
        out = "k" + out
    if len(out) > 63:
        out = out[:50] + "-" + _digest(key, 12)
    return out


def encode_value(value: str) -> str:
    """``value`` when GCP allows it, else ``h-`` and 32 hex digits of its SHA-256."""
    if _VALUE_OK.match(value):
        return value
    return "h-" + _digest(value, 32)


def encode_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """GCP labels for Rungar's ``labels``; raises ``ValueError`` past GCP's 64 labels."""
    if len(labels) > MAX_LABELS:
        raise ValueError(f"{len(labels)} labels are more than GCP's {MAX_LABELS}")
    return {encode_key(k): encode_value(v) for k, v in labels.items()}


def labels_filter(selector: Mapping[str, str], name: str = "") -> str:
    """A GCE list filter for machines carrying every pair of ``selector`` (and ``name``)."""
    terms = [f'(labels.{encode_key(k)} = "{encode_value(v)}")' for k, v in sorted(selector.items())]
    if name:
        terms.append(f'(name = "{name}")')
    return " AND ".join(terms)


def labels_metadata(labels: Mapping[str, str]) -> str:
    return json.dumps(dict(labels), sort_keys=True, separators=(",", ":"))


def decode_labels_metadata(text: str | None) -> dict[str, str] | None:
    """The exact labels stored by :func:`labels_metadata`; ``None`` when absent or unreadable."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    return {str(k): str(v) for k, v in value.items()}


def selector_matches(labels: Mapping[str, str], selector: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def instance_name(runner_name: str) -> str | None:
    """The GCE instance name of a runner (its name, lower-cased); ``None`` if GCE refuses it.

    GCE names are ``[a-z]([-a-z0-9]*[a-z0-9])?``, at most 63 characters and unique per zone;
    lower-casing keeps the mapping deterministic so ``Delete(name)`` finds the same instance.
    """
    name = runner_name.lower()
    return name if _INSTANCE_NAME_OK.match(name) else None
