"""What the aws and gcp provider tests share: a runner's create request and a loopback port
nothing listens on (their clock is :class:`rungar.testing.clock.JumpingClock`)."""

from __future__ import annotations

import socket
from collections.abc import Mapping
from typing import Any

from rungar.model.labels import machine_labels
from rungar.model.machine import CreateRequest
from rungar.model.runner_block import RunnerBlock

INSTALL = "gh-0123456789ab"
SCALE_SET = "rungar-c4"


def runner_request(name: str, runner: Mapping[str, Any], deadline: float = 0.0) -> CreateRequest:
    """A create for runner ``name`` of scale set ``rungar-c4`` in :data:`INSTALL`."""
    return CreateRequest(
        runner_name=name,
        request_id=f"req-{name}",
        scale_set=SCALE_SET,
        labels=machine_labels(INSTALL, SCALE_SET, name, "rev1"),
        runner=RunnerBlock.from_mapping(runner),
        jit_config="SECRET-JIT",
        deadline=deadline,
    )


def closed_port() -> int:
    """A loopback port with nothing listening on it (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
