"""``rungar --help`` and ``rungar status`` start quickly and import only what they use.

The CLI imports a subcommand's module only when that subcommand runs (rungar/cli/main.py), so
neither command loads a cloud SDK, the GitHub emulator, the daemon or a server. Each probe runs
in a fresh interpreter, so nothing another test imported can hide an import.

The cost is the processor time (user + system) the command's process takes, compared with the
same machine's bare ``python -c pass``, as the least of several runs of each: on an idle machine
that is its wall time, and on a busy shared one it does not count the time spent waiting for the
neighbours. Checked to fail with every subcommand imported again (the old ``build_parser``):
``--help`` then costs 0.38 s more, ``status`` 0.41 s.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys

import pytest

from rungar.cli.main import build_parser, chosen_subcommand

NEVER_ON_COMMON_PATHS = (
    "boto3",
    "botocore",
    "google.cloud",
    "moto",
    "rungar_aws",
    "rungar_gcp",
    "rungar.testing",
    "rungar.engine",
    "rungar.demo",
    "uvicorn",
    "starlette",
)
MAX_EXTRA_SECONDS = 0.25
RUNS = 5
NO_DAEMON = "/nonexistent/rungar.sock"

PROBE = """
import contextlib, io, json, sys
from rungar.cli.main import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    with contextlib.suppress(SystemExit):
        main({argv!r})
print(json.dumps(sorted(m for m in sys.modules if m.startswith({never!r}))))
"""


def imported_by(*argv: str) -> list[str]:
    code = PROBE.format(argv=list(argv), never=NEVER_ON_COMMON_PATHS)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    found: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def cpu_seconds_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def least_seconds(command: list[str], expect_code: int) -> float:
    """The least processor time one run of ``command`` took, over several runs."""
    best = float("inf")
    for _ in range(RUNS):
        before = cpu_seconds_of_children()
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
        best = min(best, cpu_seconds_of_children() - before)
        assert done.returncode == expect_code, done.stderr
    return best


def rungar(*args: str) -> list[str]:
    return [sys.executable, "-m", "rungar.cli.main", *args]


def test_help_and_status_import_no_cloud_sdk_emulator_or_daemon() -> None:
    assert imported_by("--help") == []
    assert imported_by("status", "--socket", NO_DAEMON) == []
    assert imported_by("status", "--json", "--socket", NO_DAEMON) == []


def test_a_subcommand_is_imported_only_when_it_runs() -> None:
    code = (
        "import sys, contextlib, io\n"
        "from rungar.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main(['--help'])\n"
        "print(sorted(m for m in sys.modules if m.startswith('rungar.cli.') and m not in\n"
        "    ('rungar.cli.main',)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


# A figure of speed, so `long` (make test-long): processor time still grows on a machine whose
# other builds share its caches. The default run guards the cause, the imports, above.
@pytest.mark.long
def test_help_and_status_cost_at_most_a_quarter_second_more_than_a_bare_interpreter() -> None:
    bare = least_seconds([sys.executable, "-c", "pass"], 0)
    help_ = least_seconds(rungar("--help"), 0)
    status = least_seconds(rungar("status", "--socket", NO_DAEMON), 1)
    extra = {"--help": help_ - bare, "status": status - bare}
    assert max(extra.values()) <= MAX_EXTRA_SECONDS, f"python -c pass {bare:.3f}s; extra: {extra}"


def test_the_subcommand_is_found_after_rungars_own_options() -> None:
    assert chosen_subcommand(["--color", "never", "status", "--json"]) == "status"
    assert chosen_subcommand(["runners", "remove", "status"]) == "runners"
    assert chosen_subcommand(["--help"]) is None
    assert chosen_subcommand(["stauts"]) is None


def test_only_the_chosen_subcommand_gets_its_arguments() -> None:
    parser = build_parser("status")
    assert parser.parse_args(["status", "--json", "--socket", "s"]).json is True
    everything = build_parser(full=True)
    assert everything.parse_args(["apply", "--dry-run", "f.yaml"]).dry_run is True
