"""Browser tests: the dashboards driven in a real Chromium, as a person would use them.

Playwright for Python drives the system's Chromium (Debian's ``chromium`` package, which
``make test`` installs when it is missing and it may: tools/ensure_chromium.py); Playwright's own
browser download is never used. The browser is found as ``$RUNGAR_CHROMIUM``, else ``chromium`` or
``chromium-browser`` on ``PATH``, by that tool's own lookup. Without one these tests fail with a
line saying how to install it, rather than skip: a browser test that silently does not run proves
nothing.

``make screenshots`` runs the tests marked ``screenshot`` with ``RUNGAR_SCREENSHOTS`` set to
``docs/screenshots``; :func:`shoot` writes a page's picture there and does nothing otherwise.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.waiting import WAIT

# expect(...) waits for a page's text or state up to this long (Playwright's default is 5 s).
expect.set_options(timeout=WAIT * 1000)


def _setup_tool() -> ModuleType:
    """tools/ensure_chromium.py, which make test runs first: one lookup for both."""
    path = Path(__file__).resolve().parents[2] / "tools" / "ensure_chromium.py"
    spec = importlib.util.spec_from_file_location("ensure_chromium", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("ensure_chromium", module)  # its dataclass looks itself up there
    spec.loader.exec_module(module)
    return module


ensure_chromium = _setup_tool()


def chromium_path() -> str:
    found: str | None = ensure_chromium.find_chromium(os.environ)
    if found:
        return found
    pytest.fail(
        "no Chromium found: install Debian's chromium package (apt-get install chromium) "
        "or set RUNGAR_CHROMIUM to a Chromium binary",
        pytrace=False,
    )


# One browser per test module, not per session: while Playwright's sync API is open it holds an
# event loop marked running on this thread, so every asyncio test collected after the browser
# tests (tests/integration, tests/unit, ...) would fail with "cannot be called from a running
# event loop" until it closes.
@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=chromium_path(),
            # Root in a container has no user namespaces for Chromium's sandbox.
            args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(WAIT * 1000)  # generous: the machine may be busy
    try:
        yield opened
    finally:
        context.close()


def shoot(page: Page, name: str) -> Path | None:
    """Save ``page`` as ``<name>.png`` under ``$RUNGAR_SCREENSHOTS``, when that is set."""
    folder = os.environ.get("RUNGAR_SCREENSHOTS", "")
    if not folder:
        return None
    path = Path(folder) / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)
    return path
