"""Leftover scale sets, on a fake clock: a scale set taken out of the configuration whose
runners remain is warned about every pass, counted by ``rungar_orphaned_runners`` and listed by
``status``; its busy runner is kept until its job ends, its idle one goes, and its offline
registration with no machine is swept after start_timeout."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from structlog.testing import capture_logs

from rungar.cli.status import render_status
from rungar.daemon.status import snapshot
from rungar.model.machine import MachineState
from tests.integration.test_engine_scaling import World, scale_set

WARNING = "leftover scale set: no longer configured, runners of it remain"


def gauge(world: World, name: str) -> float:
    value: float = world.engine.metrics.orphaned_runners.labels(name)._value.get()
    return value  # prometheus_client has no getter


async def leftover_world(tmp_path: Path) -> tuple[World, list[str]]:
    """``old`` ran two runners (one busy) and left a registration with no machine; then the
    daemon restarts with ``old`` taken out of the configuration."""
    world = World(tmp_path, scale_set("ci"), scale_set("old"))
    await world.start()
    old_id = world.engine.sets["old"].id
    world.engine.store.set_meta("github.scale_set_id.old", str(old_id))  # as the daemon keeps it
    await world.demand("old", 2)
    names = sorted(r.name for r in world.engine.runners.live("old"))
    world.github.start_runner(names[0], busy=True)
    world.github.start_runner(names[1], busy=False)
    await world.github.generate_jit_config(old_id, "old-0badc0de")  # its machine never came
    world.cfg = replace(world.cfg, scale_sets=(scale_set("ci"),))
    world.engine = world.new_engine()
    await world.start()
    return world, names


async def test_a_leftover_scale_set_is_warned_about_every_pass_and_counted(
    tmp_path: Path,
) -> None:
    world, (busy, _idle) = await leftover_world(tmp_path)
    with capture_logs() as logs:
        await world.engine.reconcile()
        await world.engine.drain_tasks()
        await world.engine.reconcile()
    warnings = [e for e in logs if e["event"] == WARNING]
    assert len(warnings) == 2, "one each pass"
    assert (warnings[-1]["runners"], warnings[-1]["busy"], warnings[-1]["registrations"]) == (
        1,
        1,
        1,
    )
    tracked = {r.name for r in world.engine.runners.live("old")}
    assert tracked == {busy}, "the idle runner went; the busy one keeps its job"
    assert gauge(world, "old") == 2
    text = render_status(snapshot(world.engine.ctx))
    assert (
        "scale set old is no longer configured; 1 runner of it remains (1 busy) and "
        "1 registration on GitHub with no machine"
    ) in text


async def test_once_its_runners_are_gone_the_leftover_is_no_longer_counted(
    tmp_path: Path,
) -> None:
    world, (busy, _) = await leftover_world(tmp_path)
    await world.engine.reconcile()
    await world.engine.drain_tasks()
    world.github.finish_runner(busy)  # its job ended; the ephemeral registration is gone
    world.providers["compute1"].set_state(busy, MachineState.STOPPED)  # and its runner exited
    world.clock.advance(301)  # past timing.start_timeout: the offline registration is swept
    await world.engine.reconcile()
    await world.engine.drain_tasks()
    world.clock.advance(1)
    with capture_logs() as logs:
        await world.engine.reconcile()
    assert [e for e in logs if e["event"] == WARNING] == []
    assert gauge(world, "old") == 0
    assert snapshot(world.engine.ctx)["leftovers"] == []
    assert [r.name for r in world.github.runners.values() if r.name.startswith("old")] == []
