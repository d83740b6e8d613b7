"""The runner versions placement reads: GitHub's minimum, and the version each provider's
machines run, so no runner is placed where GitHub would refuse it (docs/github.md, "Runner
versions").

A provider's version is what its ``Info`` said (runnerd's install), unless the scale set's
runner block for it names one (``runner_version``: a cloud image's runner), which wins. A
provider whose version is not known is placed on as before: only a known version below a
known minimum is skipped.
"""

from __future__ import annotations

from collections.abc import Sequence

from rungar.config.model import ScaleSetConfig
from rungar.model.runner_release import RunnerRelease
from rungar.model.runner_version import RunnerVersion, parse_runner_version
from rungar.model.sentences import below_minimum_reason, refused_reason
from rungar.placement.version_window import VersionSnapshot, VersionWindow


class RunnerVersions:
    """GitHub's minimum and each provider's (and scale set's runner block's) runner version."""

    def __init__(self) -> None:
        self.minimum: RunnerVersion | None = None
        self._reported: dict[str, RunnerVersion] = {}  # provider -> its Info's
        self._named: dict[tuple[str, str], RunnerVersion] = {}  # (scale set, provider) -> block's
        # (scale set, provider) -> the version GitHub refused there, told by a runner's exit
        self._turned_away: dict[tuple[str, str], RunnerVersion] = {}
        # The runner releases known, by version and source: GitHub's latest as it was read, and
        # rungar.yaml's github.runner_versions.latest
        self._releases: dict[tuple[RunnerVersion, str], RunnerRelease] = {}
        self.asked_at: dict[str, float] = {}  # provider -> when its Info was last asked
        # Engine settings (rungar.yaml's github.runner_versions), set by the daemon
        self.window = VersionWindow()
        self.info_interval = 300.0  # seconds between asks of a reachable provider's Info

    def configure(self, scale_sets: Sequence[ScaleSetConfig]) -> None:
        """The versions the runner blocks name (``runner_version``), read afresh."""
        self._named = {}
        for config in scale_sets:
            for entry in config.providers:
                named = parse_runner_version(entry.runner.get("runner_version"))
                if named is not None and (config.name, entry.name) not in self._named:
                    self._named[(config.name, entry.name)] = named

    def report(self, provider: str, version: str) -> bool:
        """What the provider's Info said ("" = it does not know); True when that changed."""
        parsed = parse_runner_version(version) if version else None
        before = self._reported.get(provider)
        if parsed is None:
            self._reported.pop(provider, None)
        else:
            self._reported[provider] = parsed
            # A newer runner than the one GitHub turned away: that skip is over for good.
            for key, turned in list(self._turned_away.items()):
                if key[1] == provider and parsed > turned:
                    del self._turned_away[key]
        return before != parsed

    def of(self, scale_set: str, provider: str) -> RunnerVersion | None:
        """The runner version a runner of ``scale_set`` would run on ``provider``, if known."""
        return self._named.get((scale_set, provider)) or self._reported.get(provider)

    def reported(self) -> dict[str, RunnerVersion]:
        return dict(self._reported)

    def runners(self) -> dict[str, RunnerVersion]:
        """Each provider's runner version where one is known: the oldest of what its Info says
        and what its scale sets' runner blocks name (the one GitHub would stop first)."""
        out = dict(self._reported)
        for (_, provider), version in self._named.items():
            if provider not in out or version < out[provider]:
                out[provider] = version
        return out

    def learn_release(self, release: RunnerRelease) -> bool:
        """A release GitHub named, or rungar.yaml; True when it was not known."""
        key = (release.version, release.source)
        if release.source == "configured":
            # rungar.yaml names one latest release: a changed setting replaces the last.
            for known in [k for k in self._releases if k[1] == "configured"]:
                del self._releases[known]
        before = self._releases.get(key)
        self._releases[key] = release
        return before != release

    def snapshot(self) -> VersionSnapshot:
        """What :func:`~rungar.placement.version_window.runner_deadlines` decides on."""
        return VersionSnapshot(tuple(sorted(self._releases.values())), self.runners())

    def releases(self) -> list[RunnerRelease]:
        return sorted(self._releases.values())

    def export_turned_away(self) -> list[tuple[str, str, str]]:
        """(scale set, provider, version) of every skip a runner's exit told, to keep."""
        return [(s, p, str(v)) for (s, p), v in sorted(self._turned_away.items())]

    def restore_turned_away(self, rows: list[tuple[str, str, str]]) -> None:
        """The skips a previous run kept: still applied until the provider reports a newer
        runner."""
        for scale_set, provider, text in rows:
            version = parse_runner_version(text)
            if version is not None:
                self._turned_away[(scale_set, provider)] = version

    def turned_away(self, scale_set: str, provider: str, version: RunnerVersion) -> None:
        """A runner of ``scale_set`` on ``provider`` exited because GitHub refused its
        ``version``: nothing more is placed there until the provider reports a newer one."""
        self._turned_away[(scale_set, provider)] = version

    def refused(self, scale_set: str, provider: str) -> str | None:
        """The skip reason when GitHub would refuse the runner there, else None."""
        version = self.of(scale_set, provider)
        turned = self._turned_away.get((scale_set, provider))
        if turned is not None and (version is None or version <= turned):
            return refused_reason(turned)
        if version is None or self.minimum is None or version >= self.minimum:
            return None
        return below_minimum_reason(version, self.minimum)
