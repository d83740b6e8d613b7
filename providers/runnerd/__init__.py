"""runnerd: the host provider and its admission engine (docs/admission.md).

Layers, pure first: ``config`` (runnerd.toml), ``readers`` (cgroup v2, /proc parsers),
``admission`` (pure create-or-refuse), ``history`` (SQLite job history), ``runtime``
(process, docker), ``sampler`` and ``provider`` (the effectful shell), ``api``/``cli``/``ctl``.
"""

from __future__ import annotations

from runnerd.version import VERSION as __version__

__all__ = ["__version__"]
