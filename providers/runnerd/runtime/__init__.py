"""Runtimes: how a runner is started, sampled and stopped (``[host] runtime``)."""

from __future__ import annotations

from runnerd.runtime.base import Adopted, RunnerSpec, Runtime, SliceUsage, Usage

__all__ = ["Adopted", "RunnerSpec", "Runtime", "SliceUsage", "Usage"]
