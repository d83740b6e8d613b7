"""SECURITY.md, docs/operating.md's webhook section and the systemd units say what the code
does."""

from __future__ import annotations

import re
from pathlib import Path

from rungar.github.webhook import OUTCOMES
from tests.unit.test_docs_systemd import read_unit, values

ROOT = Path(__file__).resolve().parents[2]


def test_security_md_says_how_to_report_what_is_in_scope_and_the_checklist() -> None:
    text = (ROOT / "SECURITY.md").read_text()
    for heading in ("## Reporting a vulnerability", "## In scope", "## Operator's checklist"):
        assert heading in text
    for item in (
        "**Credentials.**",
        "**JIT configs.**",
        "**Cross-job influence.**",
        "**A runner that is not single-job.**",
        "**A GitHub App, not a personal access token.**",
        "**Secrets as files of mode 0600**",
        "**mTLS to runnerd.**",
        "**Runner groups.**",
        "**Separate runner networks.**",
    ):
        assert item in text, item


def test_the_operating_guide_lists_every_webhook_outcome_the_receiver_counts() -> None:
    readme = (ROOT / "docs" / "operating.md").read_text()
    section = readme[
        readme.index("**Webhook receiver.**") : readme.index("**Metrics and alerts.**")
    ]
    documented = set(re.findall(r"`([a-z_]+)`", section))
    assert set(OUTCOMES) <= documented, set(OUTCOMES) - documented
    assert "POST /webhook" in section and "new `X-GitHub-Delivery`" in section
    assert "does not start" not in readme


def test_both_services_raise_the_open_files_limit_and_say_why() -> None:
    for name in ("rungar.service", "runnerd.service"):
        path = ROOT / "config" / "systemd" / name
        unit = read_unit(path)
        (limit,) = values(unit, "Service", "LimitNOFILE")
        assert int(limit) >= 4096
        before = path.read_text().split("LimitNOFILE=")[0].splitlines()[-1]
        assert before.startswith("#"), f"{name}: LimitNOFILE has no comment saying why"
