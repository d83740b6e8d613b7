"""The replay's engine compiled to native code by mypyc: the same code, 1.4 to 2.4 times faster.

docs/admission.md, "Try it first: runnerd simulate"; docs/benchmarks.md has the figures.
``python -m runnerd.simulate.build_engine`` (``make compiled-replay`` in a checkout; it needs mypy
and a C compiler) builds the engine's modules into ``build/`` beside this file, with a stamp of
every source the build read and the Python it was built for. :mod:`runnerd.simulate` puts that
folder first on its path only while the stamp still matches, so ``import runnerd.simulate.walks``
loads the compiled module. Otherwise (never built, a source changed since, another Python, or
``RUNNERD_SIMULATE_COMPILED=0``) the Python sources run. The tables are the same either way:
tests compare them.

What crosses between processes (:mod:`runnerd.simulate.rows`) stays plain Python, and so do the
daemon's admission and predictions, which the engine calls as any caller does.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path

# The modules compiled: the replay's loop, walks, queues and sliding-window predictor.
ENGINE = ("engine", "replay", "waiting", "walks", "window")
# ``0`` runs the Python sources even where a build matches them.
SWITCH = "RUNNERD_SIMULATE_COMPILED"
STAMP = "SOURCES"
# The build's name for the compiled modules' shared library, inside this package.
GROUP = "runnerd.simulate.engine_native"

_HERE = Path(__file__).resolve().parent


def folder() -> Path:
    """Where the build goes and is loaded from."""
    return _HERE / "build"


def sources() -> list[Path]:
    """The compiled modules and the project's modules whose types they were compiled against:
    a change in any of them makes the build stale."""
    runnerd = _HERE.parent
    found = [_HERE / f"{name}.py" for name in ENGINE]
    found.append(_HERE / "rows.py")
    found += sorted((runnerd / "admission").glob("*.py"))
    found += [runnerd / "predictor.py", runnerd / "sizing" / "runs.py"]
    spec = importlib.util.find_spec("rungar.model.job_key")
    if spec is not None and spec.origin is not None:
        found.append(Path(spec.origin))
    return found


def stamp() -> str:
    """The Python and every source, by content: what a build that may run here was built from."""
    lines = [f"python {sys.implementation.cache_tag}"]
    for path in sources():
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        lines.append(f"{digest}  {path.parent.name}/{path.name}")
    return "\n".join(lines) + "\n"


def built() -> bool:
    """A build is there and matches the sources and this Python."""
    try:
        return (folder() / STAMP).read_text() == stamp()
    except OSError:
        return False


def _switched_off() -> bool:
    return os.environ.get(SWITCH, "1") == "0"


def search_path(path: Sequence[str]) -> list[str]:
    """The package's path, with the build first when it may be used."""
    if _switched_off() or not built():
        return list(path)
    return [str(folder()), *path]


def running() -> bool:
    """The engine this process imported is the compiled one."""
    from runnerd.simulate import walks

    return not walks.__file__.endswith(".py")


def engine_note() -> str:
    """One line for ``runnerd simulate``: which engine replayed, and how to compile it if not."""
    if running():
        return "runnerd simulate: replayed by the compiled engine"
    if _switched_off():
        why = f"{SWITCH}=0"
    elif (folder() / STAMP).exists():
        why = "its compiled build was made from other sources or another Python"
    else:
        why = "it is not compiled here"
    return (
        f"runnerd simulate: replayed by the Python engine, as {why}; "
        "python -m runnerd.simulate.build_engine compiles it (replays about twice as fast)"
    )
