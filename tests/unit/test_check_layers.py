"""tools/check_layers.py: packages depend downwards only, and no two packages reach each other.

Each test builds a small tree of ``rungar`` packages in a temporary folder and runs the check on
it. (Breaking the cycle search — ``cycles`` returning [] — fails the first three tests.)
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "check_layers.py"


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_layers", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("check_layers", module)
    spec.loader.exec_module(module)
    return module


check_layers = _tool()


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _run(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = check_layers.main(["--root", str(root)])
    return code, capsys.readouterr().err


def test_two_packages_importing_each_other_fail_the_check_naming_the_cycle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _tree(
        tmp_path,
        {
            "rungar/__init__.py": "",
            "rungar/engine/__init__.py": "",
            "rungar/engine/daemon.py": "from rungar.rpc.admin_server import serve\n",
            "rungar/rpc/__init__.py": "",
            "rungar/rpc/admin_server.py": (
                "def serve():\n    from rungar.engine.control import Control\n"
            ),
        },
    )
    code, err = _run(tmp_path, capsys)
    assert code == 1
    assert "dependency cycle: rungar.engine -> rungar.rpc -> rungar.engine" in err
    # The lazy import inside a function is what closes it, and the report says where.
    assert "rungar/rpc/admin_server.py:2: rungar.rpc imports rungar.engine.control" in err


def test_a_cycle_through_three_packages_is_found_and_named_in_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _tree(
        tmp_path,
        {
            "rungar/model/__init__.py": "from rungar.config import x\n",
            "rungar/config/__init__.py": "from rungar.placement import y\n",
            "rungar/placement/__init__.py": "from ..model import z\n",  # relative, still counted
        },
    )
    code, err = _run(tmp_path, capsys)
    assert code == 1
    assert (
        "dependency cycle: rungar.config -> rungar.placement -> rungar.model -> rungar.config"
        in err
    )


def test_a_cycle_hidden_under_type_checking_still_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _tree(
        tmp_path,
        {
            "rungar/demo/__init__.py": "from rungar.cli.status import render\n",
            "rungar/cli/__init__.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                "    from rungar.demo import scenario\n"
            ),
        },
    )
    code, err = _run(tmp_path, capsys)
    assert code == 1
    assert "dependency cycle: rungar.cli -> rungar.demo -> rungar.cli" in err


def test_an_import_upwards_fails_without_a_cycle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _tree(
        tmp_path,
        {
            "rungar/engine/daemon.py": (
                "def make():\n    from rungar.testing.fake_provider import FakeProvider\n"
            ),
            "rungar/testing/fake_provider.py": "class FakeProvider: ...\n",
        },
    )
    code, err = _run(tmp_path, capsys)
    assert code == 1
    assert "cycle" not in err
    assert (
        "rungar/engine/daemon.py:2: rungar.engine may not import rungar.testing.fake_provider"
        in err
    )


def test_imports_downwards_only_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _tree(
        tmp_path,
        {
            "rungar/cli/main.py": "from rungar.engine.daemon import Daemon\nimport rungar.model\n",
            "rungar/engine/daemon.py": "from rungar.rpc.client import GrpcProvider\n",
            "rungar/rpc/client.py": "from rungar.model.machine import Machine\n",
            "rungar/model/machine.py": "import dataclasses\n",
        },
    )
    assert _run(tmp_path, capsys) == (0, "")


def test_the_repository_itself_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(TOOL.parents[1], capsys) == (0, "")


def test_two_modules_of_one_package_importing_each_other_fail_the_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # One package, so no package cycle: only the module check can see it. The way back is a
    # type-only import, as a concern that names the class composing it would write.
    _tree(
        tmp_path,
        {
            "rungar/__init__.py": "",
            "rungar/engine/__init__.py": "",
            "rungar/engine/engine.py": "from rungar.engine.scaler import Scaler\n",
            "rungar/engine/scaler.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from rungar.engine.engine import Engine\n"
            ),
        },
    )
    code, err = _run(tmp_path, capsys)
    assert code == 1
    assert (
        "module cycle: rungar.engine.engine -> rungar.engine.scaler -> rungar.engine.engine" in err
    )
    assert "rungar/engine/scaler.py:3: rungar.engine.scaler imports rungar.engine.engine" in err


def test_a_module_cycle_through_a_from_package_import_of_a_module_is_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # ``from runnerd import ctl`` names the module runnerd.ctl, not the package.
    _tree(
        tmp_path,
        {
            "rungar/__init__.py": "",
            "providers/runnerd/__init__.py": "",
            "providers/runnerd/ctl.py": "def main():\n    from runnerd.tui import app\n",
            "providers/runnerd/tui/__init__.py": "",
            "providers/runnerd/tui/app.py": "from runnerd import ctl\n",
        },
    )
    code, err = _run(tmp_path, capsys)
    assert code == 1
    assert "module cycle: runnerd.ctl -> runnerd.tui.app -> runnerd.ctl" in err


def test_a_module_importing_its_own_package_is_no_cycle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _tree(
        tmp_path,
        {
            "rungar/__init__.py": "",
            "rungar/placement/__init__.py": "from rungar.placement.fleet import Fleet\n",
            "rungar/placement/fleet.py": "from rungar.placement import attempt\n",
            "rungar/placement/attempt.py": "X = 1\n",
        },
    )
    code, err = _run(tmp_path, capsys)
    assert (code, err) == (0, "")


@pytest.mark.parametrize(
    "line",
    [
        "import asyncio\n",
        "from rungar.clock import Clock\n",
        "import logging\n",
        "from pathlib import Path\n",
        "import time\n",
    ],
)
def test_a_pure_package_may_not_use_an_event_loop_a_clock_logging_or_io(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str
) -> None:
    _tree(
        tmp_path,
        {
            "rungar/__init__.py": "",
            "rungar/clock.py": "",
            "rungar/placement/__init__.py": "",
            "rungar/placement/plan.py": line,
        },
    )
    code, err = _run(tmp_path, capsys)
    assert code == 1
    assert "rungar/placement/plan.py:1: pure module imports" in err


def _engine_rooms(root: Path, files: dict[str, str]) -> Path:
    rooms = {f"rungar/engine/{room}/__init__.py": "" for room in check_layers.ENGINE_ROOMS}
    return _tree(
        root, {"rungar/__init__.py": "", "rungar/engine/__init__.py": "", **rooms, **files}
    )


def test_an_engine_room_importing_a_room_above_it_fails_the_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # One package and no cycle: only the rooms' order can see it.
    _engine_rooms(
        tmp_path,
        {
            "rungar/engine/create/creating.py": "from rungar.engine.jobs.scaler import Scaler\n",
            "rungar/engine/jobs/scaler.py": "class Scaler: ...\n",
        },
    )
    code, err = _run(tmp_path, capsys)
    assert code == 1
    assert (
        "rungar/engine/create/creating.py:1: the engine's create may not import "
        "rungar.engine.jobs.scaler (jobs is not below it)"
    ) in err


def test_an_engine_room_may_not_import_the_engine_that_composes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _engine_rooms(
        tmp_path,
        {
            "rungar/engine/engine.py": "class Engine: ...\n",
            "rungar/engine/core/context.py": (
                "def f():\n    from rungar.engine.engine import Engine\n"
            ),
        },
    )
    code, err = _run(tmp_path, capsys)
    assert code == 1
    assert "rungar/engine/core/context.py:2: the engine's core may not import" in err


def test_engine_rooms_importing_lower_rooms_and_the_engine_importing_all_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _engine_rooms(
        tmp_path,
        {
            "rungar/engine/engine.py": "from rungar.engine.reconcile import reconciler\n",
            "rungar/engine/reconcile/reconciler.py": "from rungar.engine.jobs.scaler import S\n",
            "rungar/engine/jobs/scaler.py": "from rungar.engine.core import context\n",
            "rungar/engine/core/context.py": "from rungar.engine.report.events import E\n",
            "rungar/engine/report/events.py": "E = 1\n",
        },
    )
    assert _run(tmp_path, capsys) == (0, "")


def test_a_package_in_the_engine_that_is_no_known_room_fails_the_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _engine_rooms(tmp_path, {"rungar/engine/misc/__init__.py": "", "rungar/engine/misc/x.py": ""})
    code, err = _run(tmp_path, capsys)
    assert code == 1
    assert "engine room misc has no place in tools/check_layers.py" in err


def _pure_module(root: Path, text: str) -> Path:
    return _tree(
        root,
        {
            "rungar/__init__.py": "",
            "rungar/clock.py": "",
            "rungar/scaling/__init__.py": "",
            "rungar/scaling/schedule.py": text,
        },
    )


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("from rungar import clock\n", "pure module imports rungar.clock"),
        ("from .. import clock\n", "pure module imports rungar.clock"),
        ("import rungar.clock as c\n", "pure module imports rungar.clock"),
        (
            "from datetime import datetime\nx = datetime.now()\n",
            "pure module reads the clock: datetime.now()",
        ),
        (
            "import datetime as dt\nx = dt.datetime.now(dt.UTC)\n",
            "pure module reads the clock: dt.datetime.now()",
        ),
        ("from datetime import date\nx = date.today()\n", "reads the clock: date.today()"),
        ("import random\nx = random.random()\n", "uses random.random (a global random source)"),
        ("import random as r\nr.shuffle([])\n", "uses random.shuffle (a global random source)"),
        ("from random import choice\n", "imports random.choice (a global random source)"),
        ("import random\nx = random.SystemRandom()\n", "uses random.SystemRandom"),
        ("import secrets\n", "pure module imports secrets"),
    ],
)
def test_a_pure_module_may_not_read_a_clock_or_a_global_random_source_in_any_form(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, problem: str
) -> None:
    _pure_module(tmp_path, text)
    code, err = _run(tmp_path, capsys)
    assert code == 1
    assert "rungar/scaling/schedule.py:" in err
    assert problem in err


@pytest.mark.parametrize(
    "text",
    [
        # Calendar arithmetic on the ``now`` it is handed: no clock is read.
        "from datetime import UTC, datetime\ndef day(now: float) -> str:\n"
        "    return datetime.fromtimestamp(now, UTC).strftime('%A')\n",
        "import datetime as dt\ndef stamp(at: float) -> str:\n"
        "    return dt.datetime.fromtimestamp(at, dt.UTC).isoformat()\n",
        # A generator handed in, or seeded by the caller's seed.
        "import random\ndef pick(rng: random.Random, seed: int) -> float:\n"
        "    return rng.random() + random.Random(seed).random()\n",
        "from random import Random\nR = Random(7)\n",
    ],
)
def test_a_pure_module_may_do_calendar_arithmetic_and_use_a_generator_it_is_handed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    _pure_module(tmp_path, text)
    assert _run(tmp_path, capsys) == (0, "")
