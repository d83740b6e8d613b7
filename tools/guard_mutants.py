"""Break each guard of the engine once and check the test named for its rule catches it.

Each mutant is a file, an exact source snippet and its replacement (never a line number, so
moving code does not break the check). The check copies the source tree to a temporary folder,
runs the named tests there once unchanged (they must pass), then, for each mutant alone, puts
its replacement in the copy and runs its tests: they must fail. A snippet found anything but
exactly once is an error of its own, so a refactor that changes a guarded line makes the check
say so rather than pass. The working tree is never written: every change is made in the copy,
which is removed however the run ends.

    python tools/guard_mutants.py            # every mutant; exit 1 if one survives
    python tools/guard_mutants.py --list     # the mutants and the tests that kill them
    python tools/guard_mutants.py NAME ...   # only these mutants
    python tools/guard_mutants.py NAME ... --survey -m "not long" -n 2
        # these mutants together in a copy, and pytest run there with the arguments given
        # (how a gap is found: the default tests pass with the guard removed)

``make test-long`` runs it (tests/unit/test_guard_mutants.py).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What the tests need of the tree; .git, the virtualenv and caches are left behind.
COPIED = (
    "rungar",
    "providers",
    "tests",
    "tools",
    "config",
    "examples",
    "docs",
    "deploy",
    "proto",
    "benchmarks",
    "pyproject.toml",
    "Makefile",
    "README.md",
    "CHANGELOG.md",
    "SECURITY.md",
    "Containerfile",
    "MANIFEST.in",
)
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "build", ".mypy_cache", ".ruff_cache")
# Where the installed (editable) packages live in a tree: put first on PYTHONPATH in the copy,
# so every process the tests start imports the copy's code, not the working tree's.
PACKAGE_ROOTS = (".", "providers", "providers/gcp", "providers/aws")


@dataclass(frozen=True, slots=True)
class Mutant:
    name: str
    file: str
    snippet: str
    replacement: str
    tests: tuple[str, ...]  # pytest node ids, relative to the tree's root


UNIT = "tests/unit/test_guards.py"
SIM = "tests/sim/test_engine_guards.py"
GIVEN_UP = "tests/sim/test_engine_given_up_creates.py"

MUTANTS: tuple[Mutant, ...] = (
    # Never remove a busy runner: four places.
    Mutant(
        "surplus-takes-a-runner-github-lists-as-busy",
        "rungar/scaling/decide.py",
        "idle = [r for r in runners if r.state is RunnerState.IDLE and not r.busy]",
        "idle = [r for r in runners if r.state is RunnerState.IDLE]",
        (f"{UNIT}::test_surplus_never_takes_a_runner_github_lists_as_busy",),
    ),
    Mutant(
        "removal-ignores-githubs-busy-answer",
        "rungar/engine/remove/removing.py",
        "if outcome is RemoveOutcome.BUSY and not forced:",
        "if False:",
        (f"{SIM}::test_a_runner_github_refuses_to_remove_as_busy_is_kept",),
    ),
    Mutant(
        "removal-unregisters-a-runner-its-record-calls-busy",
        "rungar/engine/remove/removing.py",
        "if record.runner_id and (forced or not record.view().busy):",
        "if record.runner_id:",
        (f"{SIM}::test_a_runner_its_record_calls_busy_is_kept_without_asking_github",),
    ),
    Mutant(
        "removal-lets-go-a-busy-runner-never-registered",
        "rungar/engine/remove/removing.py",
        "elif record.view().busy and not forced:",
        "elif False:",
        (f"{SIM}::test_a_busy_runner_without_a_registration_is_kept",),
    ),
    Mutant(
        "replacement-removes-a-runner-that-took-a-job",
        "rungar/engine/create/rooms.py",
        "if old is None or not _never_busy_idle(old):",
        "if old is None:",
        (f"{SIM}::test_a_runner_that_takes_a_job_while_its_replacement_starts_is_kept",),
    ),
    # A registration turn never used gives its moment back; so does one cancelled as granted.
    Mutant(
        "unused-turn-keeps-its-moment",
        "rungar/github/registrations.py",
        "if not ticket.used:\n                lane = self.lanes[ticket.lane]\n"
        "                lane.pace = rp.returned(lane.pace, ticket.at)\n",
        "if not ticket.used:\n",
        (f"{UNIT}::test_a_turn_never_used_gives_its_moment_back",),
    ),
    Mutant(
        "cancelled-turn-keeps-its-moment",
        "rungar/github/registrations.py",
        "lane.pace = rp.returned(lane.pace, ticket.at)\n                ticket.answered()\n",
        "ticket.answered()\n",
        (f"{UNIT}::test_a_turn_cancelled_as_it_is_granted_gives_its_moment_back",),
    ),
    # Creates: a stranded one is kept as given up on; an unsettled one is not deleted.
    Mutant(
        "stranded-create-is-not-kept-as-given-up-on",
        "rungar/engine/create/creating.py",
        "            self._given_up(name, scale_set, result.stranded_on)\n",
        "            pass\n",
        (f"{SIM}::test_a_create_stranded_on_a_provider_is_kept_as_given_up_on_there",),
    ),
    # A create given up on: its late machine is deleted, never adopted, and only a listing
    # asked for after the give-up settles it.
    Mutant(
        "given-up-create-machine-adopted",
        "rungar/engine/reconcile/adoption.py",
        "or name in dropped or name in given_up:",
        "or name in dropped:",
        (
            f"{GIVEN_UP}::test_a_machine_that_appears_a_pass_after_the_link_heals_is_deleted_not_"
            "adopted",
        ),
    ),
    Mutant(
        "given-up-create-settled-by-an-older-listing",
        "rungar/engine/reconcile/reconciler.py",
        "before_listing=given_up_before,",
        "before_listing={entry.runner for entry in given_up},",
        (f"{GIVEN_UP}::test_a_listing_asked_for_before_the_give_up_does_not_settle_it",),
    ),
    Mutant(
        "unsettled-create-is-deleted",
        "rungar/engine/create/creating.py",
        "elif isinstance(answer, Unsettled):\n                return None\n",
        "elif False:\n                return None\n",
        (f"{SIM}::test_a_create_left_unsettled_is_not_deleted",),
    ),
    # The listener's retry, stretched while the API budget runs low.
    Mutant(
        "listener-retry-ignores-the-api-budget",
        "rungar/daemon/runloop.py",
        "await ctx.clock.sleep(delay * ctx.github.budget().stretch)",
        "await ctx.clock.sleep(delay)",
        (f"{SIM}::test_the_listeners_retry_is_stretched_while_the_api_budget_runs_low",),
    ),
    # The webhook's signature is over the exact body.
    Mutant(
        "webhook-hmac-over-the-stripped-body",
        "rungar/github/webhook.py",
        "hmac.new(secret, body, hashlib.sha256)",
        "hmac.new(secret, body.strip(), hashlib.sha256)",
        (f"{UNIT}::test_the_webhook_signature_covers_the_exact_body",),
    ),
    # Removal graces.
    Mutant(
        "starting-runner-removed-at-its-grace",
        "rungar/scaling/decide.py",
        "now - runner.created_at <= grace",
        "now - runner.created_at < grace",
        (f"{UNIT}::test_a_starting_runner_exactly_at_its_grace_stays",),
    ),
    Mutant(
        "never-connected-busy-runner-removed-as-stuck",
        "rungar/scaling/decide.py",
        "if runner.connected and _offline_too_long(runner, stuck, now):",
        "if _offline_too_long(runner, stuck, now):",
        (f"{UNIT}::test_a_busy_runner_that_never_connected_is_not_stuck_past_stuck_after",),
    ),
)


class MutantError(Exception):
    """The check cannot be made: a mutant's snippet is not found exactly once, or the copy
    imports code other than its own."""


def copy_tree(root: Path, into: Path) -> None:
    for name in COPIED:
        source = root / name
        if source.is_dir():
            shutil.copytree(source, into / name, ignore=IGNORED, symlinks=True)
        elif source.exists():
            shutil.copy2(source, into / name)


def environment(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    paths = [str(tree / p) for p in PACKAGE_ROOTS]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def check_imports_from(tree: Path) -> None:
    """The copy's packages are the ones imported there (not the working tree's)."""
    out = subprocess.run(
        [sys.executable, "-c", "import rungar, runnerd; print(rungar.__file__, runnerd.__file__)"],
        cwd=tree,
        env=environment(tree),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for path in out:
        if not Path(path).resolve().is_relative_to(tree.resolve()):
            raise MutantError(f"the copy imports {path}, not its own code")


def replaced(text: str, mutant: Mutant) -> str:
    found = text.count(mutant.snippet)
    if found != 1:
        raise MutantError(
            f"{mutant.name}: the snippet is found {found} times in {mutant.file} (expected once):"
            f" the guarded code changed; update the mutant in tools/guard_mutants.py"
        )
    return text.replace(mutant.snippet, mutant.replacement)


def pytest(tree: Path, args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "-q", "-n", "0", *args]
    return subprocess.run(  # noqa: S603 (this interpreter, pytest)
        command, cwd=tree, env=environment(tree), capture_output=True, text=True, check=False
    )


def tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def check(mutants: Sequence[Mutant], root: Path = ROOT) -> list[str]:
    """Problems found (empty: every mutant killed by its tests, which pass unchanged)."""
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="rungar-mutants-") as folder:
        tree = Path(folder)
        copy_tree(root, tree)
        check_imports_from(tree)
        for mutant in mutants:  # every snippet first: a stale one is named before any run
            try:
                replaced((tree / mutant.file).read_text(), mutant)
            except MutantError as e:
                problems.append(str(e))
        if problems:
            return problems
        tests = sorted({t for m in mutants for t in m.tests})
        clean = pytest(tree, tests)
        if clean.returncode != 0:
            return [f"the guard tests fail on the unchanged tree:\n{tail(clean.stdout)}"]
        for mutant in mutants:
            path = tree / mutant.file
            original = path.read_text()
            path.write_text(replaced(original, mutant))
            started = time.monotonic()
            try:
                run = pytest(tree, ["-x", *mutant.tests])
            finally:
                path.write_text(original)
            took = time.monotonic() - started
            # 1: tests ran and failed. Anything else (passed, or could not even be collected)
            # is not a kill.
            if run.returncode == 1:
                print(f"killed    {mutant.name} ({took:.1f} s)", flush=True)
            else:
                print(f"SURVIVED  {mutant.name} (pytest exit {run.returncode})", flush=True)
                problems.append(
                    f"{mutant.name}: {' '.join(mutant.tests)} exit {run.returncode} with"
                    f" {mutant.file} changed:\n{tail(run.stdout)}"
                )
    return problems


def survey(mutants: Sequence[Mutant], args: Sequence[str], root: Path = ROOT) -> int:
    """Run any pytest arguments with the mutants applied together in a copy: its exit code."""
    with tempfile.TemporaryDirectory(prefix="rungar-mutants-") as folder:
        tree = Path(folder)
        copy_tree(root, tree)
        check_imports_from(tree)
        for mutant in mutants:
            path = tree / mutant.file
            path.write_text(replaced(path.read_text(), mutant))
        command = [sys.executable, "-m", "pytest", *args]
        return subprocess.run(command, cwd=tree, env=environment(tree), check=False).returncode  # noqa: S603


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="only these mutants")
    parser.add_argument("--list", action="store_true", help="list the mutants and their tests")
    parser.add_argument("--survey", nargs=argparse.REMAINDER, help="pytest arguments to run")
    args = parser.parse_args(argv)
    # SIGTERM unwinds as Ctrl-C does: the running pytest is killed, the copy removed.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    by_name = {m.name: m for m in MUTANTS}
    unknown = [n for n in args.names if n not in by_name]
    if unknown:
        parser.error(f"no mutant named {', '.join(unknown)}")
    chosen = [by_name[n] for n in args.names] or list(MUTANTS)
    if args.list:
        for m in chosen:
            print(f"{m.name}\n  {m.file}: {m.snippet!r} -> {m.replacement!r}")
            for test in m.tests:
                print(f"  killed by {test}")
        return 0
    if args.survey is not None:
        return survey(chosen, [a for a in args.survey if a != "--"])
    problems = check(chosen)
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
