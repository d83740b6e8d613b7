"""FakeGitHub behaves like the GitHub protocol the engine depends on."""

from __future__ import annotations

import inspect

from rungar.clock import SystemClock
from rungar.config.model import ScaleSetConfig, ScaleSetProvider
from rungar.github.auth import PatAuth
from rungar.github.interface import Demand, GitHub, JobEvent, JobEventKind, RemoveOutcome
from rungar.github.service import ScaleSetGitHub
from rungar.testing.fake_github import FakeGitHub

CONFIG = ScaleSetConfig(
    name="linux", max_runners=4, providers=(ScaleSetProvider("p"),), labels=("x64",)
)


def test_both_implementations_have_every_method_of_the_protocol_with_its_parameters() -> None:
    """mypy checks the assignments; this checks the same at run time (checked to fail with a
    parameter of ``FakeGitHub.remove_runner`` renamed)."""
    fake: GitHub = FakeGitHub()
    real: GitHub = ScaleSetGitHub("http://127.0.0.1:1/octo", PatAuth("p"), SystemClock())
    methods = [
        name for name, value in vars(GitHub).items() if callable(value) and not name.startswith("_")
    ]
    assert "generate_jit_config" in methods and "listen" in methods
    for implementation in (fake, real):
        for name in methods:
            wanted = list(inspect.signature(getattr(GitHub, name)).parameters)[1:]
            found = list(inspect.signature(getattr(implementation, name)).parameters)
            assert found == wanted, (type(implementation).__name__, name, found)


async def test_the_fake_registers_replaces_and_removes_runners_like_github() -> None:
    gh = FakeGitHub()
    scale_set_id = await gh.ensure_scale_set(CONFIG)
    assert await gh.ensure_scale_set(CONFIG) == scale_set_id
    first, jit = await gh.generate_jit_config(scale_set_id, "linux-1")
    again, _ = await gh.generate_jit_config(scale_set_id, "linux-1")
    assert again != first and jit.startswith("fake-jit-")
    gh.start_runner("linux-1")
    assert await gh.remove_runner(again) is RemoveOutcome.BUSY
    gh.finish_runner("linux-1")
    assert await gh.list_runners(scale_set_id) == []
    assert await gh.remove_runner(again) is RemoveOutcome.REMOVED


async def test_the_fake_streams_what_the_test_queues_and_can_fail_on_demand() -> None:
    gh = FakeGitHub()
    await gh.ensure_scale_set(CONFIG)
    gh.queue_demand("linux", assigned=2)
    gh.queue_job_event("linux", JobEventKind.COMPLETED, "j1", result="Canceled")
    stream = gh.listen(CONFIG)
    demand = await anext(stream)
    event = await anext(stream)
    assert isinstance(demand, Demand) and demand.assigned == 2
    assert isinstance(event, JobEvent) and event.canceled
    assert gh.capacity["linux"] == 4
    gh.fail_next("generate_jit_config")
    try:
        await gh.generate_jit_config(1, "x")
    except Exception as e:
        assert "failed" in str(e)
    else:
        raise AssertionError("fail_next did not fail")
