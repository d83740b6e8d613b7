"""The labels every machine Rungar creates carries, so listings can be adopted."""

from __future__ import annotations

MANAGED = "rungar.sh/managed"
INSTALLATION = "rungar.sh/installation"
SCALE_SET = "rungar.sh/scale-set"
RUNNER = "rungar.sh/runner"
REVISION = "rungar.sh/revision"
PROVIDER = "rungar.sh/provider"  # which provider of ours made it: two may share one backend


def machine_labels(
    installation: str, scale_set: str, runner: str, revision: str, provider: str = ""
) -> dict[str, str]:
    labels = {
        MANAGED: "true",
        INSTALLATION: installation,
        SCALE_SET: scale_set,
        RUNNER: runner,
        REVISION: revision,
    }
    if provider:
        labels[PROVIDER] = provider
    return labels


def installation_selector(installation: str) -> dict[str, str]:
    """What ``List`` is asked for: every machine of this installation."""
    return {MANAGED: "true", INSTALLATION: installation}
