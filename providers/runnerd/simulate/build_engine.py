"""Compile ``runnerd simulate``'s replay engine: ``python -m runnerd.simulate.build_engine``.

docs/admission.md, "Try it first: runnerd simulate". Builds the modules of
:data:`runnerd.simulate.compiled.ENGINE` into :func:`runnerd.simulate.compiled.folder`, stamped
with what they were built from; :mod:`runnerd.simulate.compiled` says when a build is used. Needs
mypy (which carries mypyc), setuptools and a C compiler; without them the replay stays pure Python.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from runnerd.simulate.compiled import ENGINE, GROUP, STAMP, built, folder, stamp


def build(quiet: bool = False) -> Path:
    """Compile the engine into :func:`folder`, replacing any build there. Needs mypy (its mypyc)
    and a C compiler; raises :class:`RuntimeError` saying which is missing."""
    try:
        from mypyc.build import mypycify
        from setuptools import Distribution  # type: ignore[import-untyped]  # no stubs installed
        from setuptools.command.build_ext import (  # type: ignore[import-untyped]  # no stubs
            build_ext,
        )
    except ImportError as exc:
        raise RuntimeError(
            f"compiling the replay needs mypy and setuptools ({exc}): pip install mypy setuptools"
        ) from exc
    if shutil.which(os.environ.get("CC", "cc")) is None:
        raise RuntimeError("compiling the replay needs a C compiler (cc): apt-get install gcc")
    expected = stamp()
    package = folder().parent.parent  # the runnerd package
    # mypy reads the types of rungar's modules too, wherever that package is installed: an
    # editable checkout's folder goes on its path; it finds an installed copy in site-packages
    # itself, and refuses site-packages on its path.
    rungar = importlib.util.find_spec("rungar")
    if rungar is None or not rungar.submodule_search_locations:
        raise RuntimeError("compiling the replay needs the rungar package importable")
    rungar_parent = str(Path(rungar.submodule_search_locations[0]).parent)
    search = "" if rungar_parent.endswith("-packages") else rungar_parent
    with tempfile.TemporaryDirectory(prefix="runnerd-compile-") as tmp:
        work = Path(tmp)
        # Compiled from a copy of the package, so that mypy's module names come from its paths
        # and it never reads the other modules of the folder the package is installed in.
        source = work / "src"
        shutil.copytree(
            package, source / "runnerd", ignore=shutil.ignore_patterns("build", "__pycache__")
        )
        previous, mypy_path = Path.cwd(), os.environ.get("MYPYPATH")
        os.chdir(source)
        os.environ["MYPYPATH"] = search
        try:
            paths = [f"runnerd/simulate/{name}.py" for name in ENGINE]
            paths.append(f"--cache-dir={work / 'mypy'}")  # none left in the source tree
            try:
                extensions = mypycify(
                    paths, opt_level="3", group_name=GROUP, target_dir=str(work / "c")
                )
            except SystemExit as exc:  # mypyc exits on a type error, having printed it
                raise RuntimeError(f"mypyc refused the engine's sources (exit {exc.code})") from exc
            command = build_ext(Distribution({"ext_modules": extensions}))
            command.build_lib = str(work / "lib")
            command.build_temp = str(work / "temp")
            command.ensure_finalized()
            if quiet:
                command.distribution.verbose = 0
            command.run()
        finally:
            os.chdir(previous)
            if mypy_path is None:
                os.environ.pop("MYPYPATH", None)
            else:
                os.environ["MYPYPATH"] = mypy_path
        made = sorted((work / "lib" / "runnerd" / "simulate").glob("*.so"))
        if len(made) != len(ENGINE) + 1:  # a module each and their shared library
            raise RuntimeError(f"the build made {[p.name for p in made]}, not every module")
        if stamp() != expected:
            raise RuntimeError("a source changed while the replay was compiled: compile again")
        target = folder()
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir()
        for path in made:
            shutil.copy2(path, target / path.name)
        # The stamp last: a build cut short is never taken for a whole one.
        (target / STAMP).write_text(expected)
    return target


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m runnerd.simulate.build_engine",
        description="Compile runnerd simulate's replay engine (mypyc), or say whether it is.",
    )
    parser.add_argument("--check", action="store_true", help="only say whether a build matches")
    parser.add_argument("--force", action="store_true", help="compile even when a build matches")
    args = parser.parse_args(argv)
    if built() and not args.force:
        print(f"the compiled replay in {folder()} matches its sources")
        return 0
    if args.check:
        print(f"no compiled replay matches the sources in {folder()}")
        return 1
    started = time.monotonic()
    try:
        target = build(quiet=True)
    except RuntimeError as exc:
        print(f"runnerd simulate stays pure Python: {exc}", file=sys.stderr)
        return 1
    print(f"compiled the replay into {target} in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
