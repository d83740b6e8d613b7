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
from rungar.model.runner_version import RunnerVersion, parse_runner_version
from rungar.model.sentences import below_minimum_reason, refused_reason


class RunnerVersions:
    """GitHub's minimum and each provider's (and scale set's runner block's) runner version."""

    def __init__(self) -> None:
        self.minimum: RunnerVersion | None = None
        self._reported: dict[str, RunnerVersion] = {}  # provider -> its Info's
        self._named: dict[tuple[str, str], RunnerVersion] = {}  # (scale set, provider) -> block's
        self.asked: set[str] = set()  # providers whose Info has been asked
        # (scale set, provider) -> the version GitHub refused there, told by a runner's exit
        self._turned_away: dict[tuple[str, str], RunnerVersion] = {}

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
        return before != parsed

    def of(self, scale_set: str, provider: str) -> RunnerVersion | None:
        """The runner version a runner of ``scale_set`` would run on ``provider``, if known."""
        return self._named.get((scale_set, provider)) or self._reported.get(provider)

    def reported(self) -> dict[str, RunnerVersion]:
        return dict(self._reported)

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
