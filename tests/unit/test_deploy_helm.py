"""The Helm chart under deploy/helm/rungar renders to what its README promises: one replica
replaced with Recreate, non-root on a read-only root filesystem, probes through the admin
socket, secrets from a Secret, a NetworkPolicy and (when asked) a ServiceMonitor.

helm is not installed where this usually runs, so the templates are rendered by
`helm_subset`, which understands only the few template forms the chart uses and refuses any
other; the values are checked against the chart's own values.schema.json. Where helm is on
PATH, `helm template` and `helm lint` run too. What neither checks: that a cluster accepts the
objects (no API server here).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.helm_subset import Unsupported, merge, render

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "rungar"
ALL_ON: dict[str, Any] = {
    "metrics": {"serviceMonitor": {"enabled": True}},
    "networkPolicy": {"metricsFrom": [{"namespaceSelector": {"matchLabels": {"name": "mon"}}}]},
    "persistence": {"enabled": True, "storageClass": "fast"},
    "secretFiles": {"app.pem": "-----BEGIN KEY-----\n"},
    "env": [{"name": "HTTPS_PROXY", "value": "http://proxy:3128"}],
}


def values(override: dict[str, Any] | None = None) -> dict[str, Any]:
    return merge(yaml.safe_load((CHART / "values.yaml").read_text()), override or {})


def rendered(override: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """Every object the chart renders, by kind (each kind appears once)."""
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    objects: dict[str, dict[str, Any]] = {}
    for template in sorted((CHART / "templates").glob("*.yaml")):
        text = render(template.read_text(), values(override), "ci", "runners", chart)
        for doc in yaml.safe_load_all(text):
            if doc:
                assert doc["kind"] not in objects, doc["kind"]
                objects[doc["kind"]] = doc
    return objects


def test_the_default_and_the_all_on_values_match_the_charts_schema() -> None:
    jsonschema: Any = pytest.importorskip("jsonschema")
    schema = yaml.safe_load((CHART / "values.schema.json").read_text())
    jsonschema.validate(values(), schema)
    jsonschema.validate(values(ALL_ON), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(values({"settings": {"socket": "/tmp/other.sock"}}), schema)


def test_one_replica_is_replaced_with_recreate_as_non_root_on_a_read_only_root() -> None:
    deployment = rendered()["Deployment"]
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["automountServiceAccountToken"] is False
    [container] = pod["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert mounts["/run/rungar"] == "run" and mounts["/var/lib/rungar"] == "state"
    assert mounts["/etc/rungar/secrets"] == "secrets"


def test_every_probe_asks_the_daemon_through_its_admin_socket() -> None:
    [container] = rendered()["Deployment"]["spec"]["template"]["spec"]["containers"]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        command = container[probe]["exec"]["command"]
        assert command == ["rungar", "status", "--socket", "/run/rungar/rungar.sock"], probe


def test_the_settings_and_scale_sets_reach_the_pod_as_rungar_reads_them(tmp_path: Path) -> None:
    from rungar.config.loader import parse_scale_sets
    from rungar.daemon.settings import load_settings

    config = rendered()["ConfigMap"]["data"]
    assert yaml.safe_load(config["rungar.yaml"]) == values()["settings"]
    (tmp_path / "rungar.yaml").write_text(config["rungar.yaml"])
    settings = load_settings(str(tmp_path / "rungar.yaml"))  # raises on anything it refuses
    assert settings.socket == "/run/rungar/rungar.sock"
    assert parse_scale_sets(config["scale_sets.yaml"], "scale_sets.yaml").providers[0].name == "gcp"


def test_secrets_come_from_the_charts_secret_or_an_existing_one() -> None:
    objects = rendered(ALL_ON)
    assert objects["Secret"]["stringData"] == {"app.pem": "-----BEGIN KEY-----\n"}
    volumes = {v["name"]: v for v in objects["Deployment"]["spec"]["template"]["spec"]["volumes"]}
    assert volumes["secrets"]["secret"]["secretName"] == "ci-secrets"
    existing = rendered({"existingSecret": "rungar-app"})
    assert "Secret" not in existing
    volumes = {v["name"]: v for v in existing["Deployment"]["spec"]["template"]["spec"]["volumes"]}
    assert volumes["secrets"]["secret"]["secretName"] == "rungar-app"


def test_the_network_policy_lets_in_only_scrapers_of_the_metrics_port() -> None:
    closed = rendered()["NetworkPolicy"]["spec"]
    assert closed["ingress"] is None  # no rule: nothing may connect
    opened = rendered(ALL_ON)["NetworkPolicy"]["spec"]
    assert opened["ingress"] == [
        {"from": ALL_ON["networkPolicy"]["metricsFrom"], "ports": [{"port": "metrics"}]}
    ]
    assert rendered({"networkPolicy": {"enabled": False}}).get("NetworkPolicy") is None


def test_a_service_monitor_and_a_claim_only_when_asked() -> None:
    assert "ServiceMonitor" not in rendered() and "PersistentVolumeClaim" not in rendered()
    objects = rendered(ALL_ON)
    assert objects["ServiceMonitor"]["spec"]["endpoints"] == [
        {"port": "metrics", "interval": "30s"}
    ]
    assert objects["PersistentVolumeClaim"]["spec"]["storageClassName"] == "fast"


def test_the_renderer_refuses_what_it_does_not_understand() -> None:
    chart = {"name": "c", "version": "1", "appVersion": "1"}
    with pytest.raises(Unsupported):
        render('{{ include "x" . }}', {}, "r", "n", chart)
    with pytest.raises(Unsupported):
        render("{{- if .Values.a }}open", {}, "r", "n", chart)


@pytest.mark.skipif(shutil.which("helm") is None, reason="helm is not installed")
def test_helm_itself_lints_and_renders_the_chart() -> None:
    subprocess.run(["helm", "lint", str(CHART)], check=True, capture_output=True)
    out = subprocess.run(
        ["helm", "template", "ci", str(CHART)], check=True, capture_output=True, text=True
    ).stdout
    kinds = {doc["kind"] for doc in yaml.safe_load_all(out) if doc}
    assert {"Deployment", "ConfigMap", "Secret", "NetworkPolicy"} <= kinds
