"""Ensure a configured scale set exists on GitHub as configured (docs/github.md, "Scale sets").

At start, after ``rungar apply``, and whenever GitHub says the scale set is gone (ARC #3205,
#3935, PR #4571): find it by name in its runner group. When it is not there but the scale set
this installation registered before (``known_id``) still exists under that name, its runner
group changed: it is updated in place (PATCH ``runnerGroupId`` and labels), as ARC does, instead
of a second scale set of the same name being created beside it. Labels that differ from the
configured ones are PATCHed too. Only when neither exists is it created. If GitHub still holds
other labels after the update (GHES without custom labels keeps only the name), that is warned
about: jobs asking for the others would wait forever.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from rungar.config.model import ScaleSetConfig
from rungar.github.client import ScaleSetClient
from rungar.github.wire import ScaleSet, scale_set_labels

log = structlog.get_logger("rungar.github")


def expected_labels(name: str, labels: Sequence[str]) -> tuple[str, ...]:
    """The labels GitHub should hold: the name first, then the configured ones, de-duplicated."""
    return tuple(label["name"] for label in scale_set_labels(name, list(labels)))


def label_difference(
    configured: Sequence[str], on_github: Sequence[str]
) -> tuple[list[str], list[str]]:
    """(missing on GitHub, extra on GitHub), compared case-insensitively."""
    want = {x.lower(): x for x in configured}
    have = {x.lower(): x for x in on_github}
    missing = [want[k] for k in want if k not in have]
    extra = [have[k] for k in have if k not in want]
    return missing, extra


async def ensure_scale_set(
    client: ScaleSetClient, config: ScaleSetConfig, known_id: int = 0
) -> ScaleSet:
    group = await client.get_runner_group_by_name(config.runner_group)
    wanted = expected_labels(config.name, config.labels)
    found = await client.get_scale_set(group.id, config.name)
    if found is None and known_id:
        previous = await client.get_scale_set_by_id(known_id)
        if previous is not None and previous.name == config.name:
            found = await client.update_scale_set(
                known_id,
                {"runnerGroupId": group.id, "labels": scale_set_labels(config.name, wanted[1:])},
            )
            log.info(
                "github.scale_set_updated",
                scale_set=config.name,
                scale_set_id=known_id,
                runner_group=group.name,
                previous_runner_group_id=previous.runner_group_id,
                labels=list(wanted),
            )
    elif found is not None and any(label_difference(wanted, found.labels)):
        found = await client.update_scale_set(
            found.id, {"labels": scale_set_labels(config.name, wanted[1:])}
        )
        log.info(
            "github.scale_set_updated",
            scale_set=config.name,
            scale_set_id=found.id,
            labels=list(wanted),
        )
    if found is None:
        found = await client.create_scale_set(config.name, group.id, wanted[1:])
        log.info(
            "github.scale_set_created",
            scale_set=config.name,
            scale_set_id=found.id,
            runner_group=group.name,
            labels=list(wanted),
        )
    missing, extra = label_difference(wanted, found.labels)
    if missing or extra:
        log.warning(
            "github.scale_set_labels_differ",
            scale_set=config.name,
            scale_set_id=found.id,
            configured=list(wanted),
            on_github=list(found.labels),
            missing_on_github=missing,
            extra_on_github=extra,
        )
    return found
