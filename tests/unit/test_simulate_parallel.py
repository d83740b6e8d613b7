"""``runnerd simulate``'s rows side by side in forked workers, against one after another."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
import runnerd.simulate.parallel as parallel
from runnerd.admission import Policy
from runnerd.config import parse_config
from runnerd.history_generate import example_config, generate, write_history
from runnerd.simulate.command import limits_of, rules_of
from runnerd.simulate.replay import replay, replayable
from runnerd.simulate.rows import ProfileShape, ReplayResult, Scenario
from runnerd.sizing.runs import open_read_only, read_runs

from tests.unit.sizing_fixtures import NOW, G

ROOT = Path(__file__).resolve().parents[2]

# Run in a process of its own: the test process may run other threads, and then nothing forks.
WORKERS_SCRIPT = textwrap.dedent(
    """
    import os, sys
    import runnerd.simulate.parallel as parallel
    from runnerd.admission import Policy
    from runnerd.config import parse_config
    from runnerd.simulate.command import limits_of, rules_of
    from runnerd.simulate.replay import replayable
    from runnerd.simulate.rows import ProfileShape, Scenario
    from runnerd.sizing.runs import open_read_only, read_runs

    db, config_text, pids_file = sys.argv[1:4]
    config = parse_config(config_text)
    with open_read_only(db) as conn:
        runs = read_runs(conn, 0)
    shapes = {n: ProfileShape(p.memory, p.cpus) for n, p in config.profiles.items()}
    jobs = replayable(runs, shapes)
    slots = {"jvm": 3, "node": 8}
    rows = [
        Scenario("caps", Policy.CAPS, {"jvm": 2, "node": 6}),
        Scenario("measured", Policy.MEASURED, slots),
        Scenario("cpu ×1", Policy.MEASURED, slots, 1.0),
        Scenario("cpu ×1.5", Policy.MEASURED, slots, 1.5),
    ]
    limits = limits_of(config, 33 * 1024**3)
    inner = parallel.replay

    def recording(*args, **kwargs):
        with open(pids_file, "a") as out:
            out.write(f"{os.getpid()}\\n")
        return inner(*args, **kwargs)

    parallel.replay = recording
    assert parallel._can_fork()
    side_by_side = parallel.replay_all(rows, shapes, jobs, limits, rules_of(config), 6.0, workers=2)
    one_by_one = parallel.replay_all(rows, shapes, jobs, limits, rules_of(config), 6.0, workers=1)
    assert side_by_side == one_by_one, (side_by_side, one_by_one)
    assert [r.scenario.name for r in side_by_side] == [s.name for s in rows]
    print(os.getpid(), sum(r.jobs for r in side_by_side))
    """
)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    tmp = tmp_path_factory.mktemp("parallel")
    db = tmp / "history.db"
    write_history(db, generate(400, 1, 5, NOW))
    return db, example_config(str(db), 400, 1)


def test_rows_replayed_in_forked_workers_equal_the_rows_replayed_one_after_another(
    history: tuple[Path, str], tmp_path: Path
) -> None:
    db, config_text = history
    pids_file = tmp_path / "pids"
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'providers'}{os.pathsep}{ROOT}"}
    done = subprocess.run(
        [sys.executable, "-c", WORKERS_SCRIPT, str(db), config_text, str(pids_file)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    parent, jobs = map(int, done.stdout.split())
    assert jobs > 4 * 300  # four rows of a day's generated jobs
    pids = pids_file.read_text().split()
    assert len(pids) == 8  # four rows side by side, then the same four here
    side_by_side = {int(p) for p in pids[:4]}
    assert parent not in side_by_side and len(side_by_side) == 2  # both workers replayed
    assert {int(p) for p in pids[4:]} == {parent}


def test_with_another_thread_running_the_rows_are_replayed_here(
    history: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db, config_text = history
    config = parse_config(config_text)
    with open_read_only(db) as conn:
        runs = read_runs(conn, 0)
    shapes = {n: ProfileShape(p.memory, p.cpus) for n, p in config.profiles.items()}
    jobs = replayable(runs, shapes)
    rows = [
        Scenario("caps", Policy.CAPS, {"jvm": 2, "node": 6}),
        Scenario("cpu ×1", Policy.MEASURED, {"jvm": 3, "node": 8}, 1.0),
    ]
    pids: list[int] = []

    def recording(*args: object, **kwargs: object) -> ReplayResult:
        pids.append(os.getpid())
        # why the ignore[arg-type] below: forwards replay()'s arguments unchanged
        return replay(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(parallel, "replay", recording)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        results = parallel.replay_all(
            rows, shapes, jobs, limits_of(config, 33 * G), rules_of(config), 6.0, workers=2
        )
    finally:
        stop.set()
        other.join()
    assert pids == [os.getpid(), os.getpid()]
    assert [r.scenario.name for r in results] == ["caps", "cpu ×1"]
    assert all(r.seconds > 0 for r in results)
