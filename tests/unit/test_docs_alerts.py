"""The alert rules name only metrics, and labels of them, that the daemon exports."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.metrics import MetricWrapperBase

from rungar.engine.report.metrics import Metrics

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "config" / "alerts" / "rungar.rules.yaml"
# What a family of each type exposes as sample names.
SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "summary": ("", "_count", "_sum", "_created"),
    "info": ("_info",),
}
SELECTOR = re.compile(r"\b(rungar_[a-z0-9_]+)\s*(\{[^}]*\})?")
MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")


def exported(metrics: Metrics) -> dict[str, set[str]]:
    """Every sample name the registry exposes, with the label names of its family."""
    labels: dict[str, set[str]] = {}
    for value in vars(metrics).values():
        if isinstance(value, MetricWrapperBase):
            # The family's declared label names; a family without children has no samples to
            # read them from.
            labels[value._name] = set(value._labelnames)
    names: dict[str, set[str]] = {}
    for family in metrics.registry.collect():
        for suffix in SUFFIXES[family.type]:
            extra = {"le"} if suffix == "_bucket" else set()
            names[family.name + suffix] = labels.get(family.name, set()) | extra
    return names


def rules(document: Any) -> list[dict[str, Any]]:
    return [rule for group in document["groups"] for rule in group["rules"]]


def problems(document: Any, names: dict[str, set[str]]) -> list[str]:
    found = []
    for rule in rules(document):
        expr = re.sub(r'"[^"]*"', '""', str(rule["expr"]))  # label values are not names
        for name, braces in SELECTOR.findall(expr):
            if name not in names:
                found.append(f"{rule['alert']}: {name} is not exported")
                continue
            for label in MATCHER.findall(braces or ""):
                if label not in names[name]:
                    found.append(f"{rule['alert']}: {name} has no label {label}")
        if expr.count("(") != expr.count(")"):
            found.append(f"{rule['alert']}: unbalanced parentheses")
    return found


@pytest.fixture(scope="module")
def document() -> Any:
    return yaml.safe_load(RULES.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def names() -> dict[str, set[str]]:
    return exported(Metrics())


def test_every_metric_and_label_the_rules_name_is_exported(
    document: Any, names: dict[str, set[str]]
) -> None:
    assert problems(document, names) == []


def test_the_rules_name_rungar_metrics_at_all(document: Any) -> None:
    mentioned = {m for rule in rules(document) for m, _ in SELECTOR.findall(str(rule["expr"]))}
    assert len(mentioned) >= 8


def test_the_alerts_the_monitoring_guide_promises_are_there(document: Any) -> None:
    alerts = {rule["alert"] for rule in rules(document)}
    assert {
        "RungarDown",
        "RungarProviderUnreachable",
        "RungarCannotScaleUp",
        "RungarJobsWaitTooLong",
        "RungarReconcileStalled",
        "RungarGitHubRefusing",
        "RungarGitHubUnreachable",
        "RungarScaleSetBehind",
        "RungarScaleSetPaused",
    } <= alerts
    assert len(alerts) == len(rules(document)), "alert names repeat"


def test_every_rule_has_a_severity_a_summary_and_a_description(document: Any) -> None:
    for rule in rules(document):
        assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
        assert rule["annotations"]["summary"], rule["alert"]
        assert rule["annotations"]["description"], rule["alert"]
        if "for" in rule:
            assert re.fullmatch(r"\d+[smh]", rule["for"]), rule["alert"]


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("rate(rungar_runners_made_total[5m]) > 0", "rungar_runners_made_total is not exported"),
        ("rungar_runners_created > 0", "rungar_runners_created is not exported"),
        ('rungar_provider_reachable{zone="a"} == 0', "rungar_provider_reachable has no label zone"),
        ("sum(rate(rungar_runners_created_total[5m])", "unbalanced parentheses"),
    ],
)
def test_a_rule_naming_what_is_not_exported_is_reported(
    expr: str, expected: str, names: dict[str, set[str]]
) -> None:
    document = {"groups": [{"name": "g", "rules": [{"alert": "Broken", "expr": expr}]}]}
    assert problems(document, names) == [f"Broken: {expected}"]


def test_label_names_include_the_histogram_bucket_bound(names: dict[str, set[str]]) -> None:
    assert names["rungar_job_runner_wait_seconds_bucket"] == {"scale_set", "le"}
    assert names["rungar_provider_calls_total"] == {"provider", "call", "result"}
