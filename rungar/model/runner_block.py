"""A runner block: the merged ``runner:`` mapping of a provider and a scale set.

The typed resources (vcpus, memory, disk, image) are read out because every provider type
understands them; the rest stays as the type's own keys in ``extra``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rungar.model.units import format_bytes, parse_bytes

TYPED_KEYS = ("vcpus", "memory", "disk", "image")


@dataclass(frozen=True, slots=True)
class RunnerBlock:
    vcpus: float = 0.0
    memory_bytes: int = 0
    disk_bytes: int = 0
    image: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, block: Mapping[str, Any]) -> RunnerBlock:
        """Parse a merged block; raises ``ValueError`` naming the key that is wrong."""
        vcpus_raw = block.get("vcpus", 0)
        if isinstance(vcpus_raw, bool) or not isinstance(vcpus_raw, int | float) or vcpus_raw < 0:
            raise ValueError(f"vcpus: {vcpus_raw!r} is not a number of CPUs")
        try:
            memory = parse_bytes(block["memory"]) if block.get("memory") is not None else 0
        except ValueError as e:
            raise ValueError(f"memory: {e}") from e
        try:
            disk = parse_bytes(block["disk"]) if block.get("disk") is not None else 0
        except ValueError as e:
            raise ValueError(f"disk: {e}") from e
        image = block.get("image") or ""
        if not isinstance(image, str):
            raise ValueError(f"image: {image!r} is not a string")
        extra = {k: v for k, v in block.items() if k not in TYPED_KEYS}
        return cls(float(vcpus_raw), memory, disk, image, extra)

    def to_mapping(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.extra)
        if self.vcpus:
            out["vcpus"] = self.vcpus
        if self.memory_bytes:
            out["memory"] = self.memory_bytes
        if self.disk_bytes:
            out["disk"] = self.disk_bytes
        if self.image:
            out["image"] = self.image
        return out

    def describe(self) -> str:
        """Size text as ``status`` shows it: ``4 vCPU, 8G``."""
        parts = []
        if self.vcpus:
            parts.append(f"{self.vcpus:g} vCPU")
        if self.memory_bytes:
            parts.append(format_bytes(self.memory_bytes))
        if not parts:
            for key in ("profile", "machine_type", "instance_type"):
                value = self.extra.get(key)
                if isinstance(value, list | tuple):
                    parts.append(" or ".join(str(v) for v in value))
                elif value is not None:
                    parts.append(str(value))
        return ", ".join(parts)
