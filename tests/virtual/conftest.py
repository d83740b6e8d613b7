"""A failing seeded test names its seed and the command that replays it alone; the engine's
log lines are kept in memory, not rendered (an hour of a fleet writes thousands)."""

from __future__ import annotations

from collections.abc import Generator, Iterator

import pluggy
import pytest
import structlog

from tests.virtual.harness import SEED_VARIABLE


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pluggy.Result[pytest.TestReport]]:
    outcome = yield
    report = outcome.get_result()
    callspec = getattr(item, "callspec", None)
    if report.when != "call" or not report.failed or callspec is None:
        return
    seed = callspec.params.get("seed")
    if seed is None:
        return
    name = getattr(item, "originalname", item.name)
    test = f"{item.path.relative_to(item.config.rootpath)}::{name}"
    replay = f"{SEED_VARIABLE}={seed} .venv/bin/pytest -q '{test}'"
    report.sections.append(("virtual clock", f"seed {seed}; replay: {replay}"))


@pytest.fixture(autouse=True)
def quiet_logs() -> Iterator[None]:
    with structlog.testing.capture_logs():
        yield
