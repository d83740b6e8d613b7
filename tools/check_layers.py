"""Import-layer check: which package may import which, and no cycles between packages or
between modules.

Five rules, every import counted — at the top of a module, inside a function (a lazy import is
a dependency all the same) or under ``TYPE_CHECKING`` (a type-only import is a dependency of the
design):

1. Pure packages (decisions only) import no I/O library, clock or logging, in any import form
   (``from rungar import clock`` as well as ``import rungar.clock``), and read neither the wall
   clock nor a global random source. ``datetime`` stays importable: pure decisions do calendar
   arithmetic on the ``now`` they are handed (a schedule's window in its time zone, a warm
   pool's slot), so only the calls that read the wall clock (``datetime.now()``, ``today()``,
   ``utcnow()``, on ``datetime`` or ``date``) are refused. Of ``random`` only the class
   ``random.Random`` is allowed (a generator handed in, or seeded by the caller's seed); its
   module functions (``random.random()``, ``choice``, ``shuffle`` …) draw from a hidden shared
   generator, and ``SystemRandom`` from the machine, so they are refused, as is ``secrets``.
2. Only ``rungar/rpc`` (and the test kit, the providers, tests and tools) imports grpc.
3. Packages depend downwards only, in the order of :data:`LAYERS` (docs/architecture.md):
   a package imports packages of lower layers, never one of its own layer or above. Packages
   that import each other, directly or through others, form a cycle; every cycle is reported
   with the imports that close it, whatever the layers say.
4. No two modules (files) import each other, directly or through others, inside a package or
   across packages: ``from P import name`` depends on the module ``P.name`` when there is one,
   else on ``P``; a module's import of its own package's ``__init__`` is not counted.
5. Inside the engine, its rooms depend downwards only, in the order of :data:`ENGINE_ROOMS`: a
   module of ``rungar/engine/<room>/`` imports modules of its own room and of lower rooms, never
   one of a room beside or above it, nor ``rungar/engine/engine.py``, which composes them all.

Exit 1 listing every offending import and every cycle; ``--root DIR`` checks another tree.
"""

from __future__ import annotations

import argparse
import ast
import itertools
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Packages (and modules) that make decisions only: no I/O libraries, no event loop, no clock,
# no logging. The try-loop that carries a placement plan out lives in the engine.
PURE = [
    "rungar/placement",
    "rungar/scaling",
    "rungar/usage",
    "rungar/model",
    "rungar/engine/reconcile/adoption",
    "rungar/engine/reconcile/given_up_plan",
    "rungar/engine/reconcile/ownership",
    "rungar/engine/reconcile/sightings",
    "rungar/engine/jobs/reason_plan",
    "providers/runnerd/admission",
    "providers/runnerd/sizing/advise",
    "providers/runnerd/sizing/auto",
]
IO_MODULES = {
    "asyncio",
    "rungar.clock",
    "os",
    "pathlib",
    "io",
    "shutil",
    "tempfile",
    "threading",
    "signal",
    "select",
    "socket",
    "sqlite3",
    "subprocess",
    "httpx",
    "grpc",
    "structlog",
    "logging",
    "time",
    "urllib",
    "http",
    "starlette",
    "uvicorn",
    "boto3",
    "google",
    "secrets",
}
# Calls that read the wall clock through datetime, refused in a pure module.
CLOCK_CALLS = {"now", "today", "utcnow"}
GRPC_ALLOWED = ["rungar/rpc", "rungar/testing", "providers", "tests", "benchmarks", "tools"]

# Rungar's packages from the bottom up. A package may import any package of a lower layer.
# The provider packages (runnerd, rungar_gcp, rungar_aws) build on the shared kit and are
# checked for cycles with it; ``rungar.simulate`` drives runnerd's own admission.
LAYERS: list[set[str]] = [
    {"rungar.clock", "rungar.errors", "rungar.stopping", "rungar.model"},
    {"rungar.logs", "rungar.config"},
    {"rungar.placement", "rungar.scaling", "rungar.usage"},
    {"rungar.store", "rungar.github", "rungar.web", "rungar.rpc"},
    {"rungar.engine"},
    {"rungar.daemon"},
    {"rungar.testing", "rungar.cloudkit"},
    {"runnerd", "rungar_gcp", "rungar_aws"},
    {"rungar.simulate", "rungar.doctor"},
    {"rungar.demo"},
    {"rungar.cli"},
]
# The engine's rooms (its sub-packages) from the bottom up: what it tells (the event log,
# metrics), the context every concern shares, then the concerns, each above those it calls.
ENGINE = "rungar.engine"
ENGINE_ROOMS = ["report", "core", "create", "remove", "jobs", "reconcile"]
# Where each provider package's sources live (its import name is the folder's own name).
PROVIDER_SOURCES = ["providers/runnerd", "providers/gcp/rungar_gcp", "providers/aws/rungar_aws"]


@dataclass(frozen=True, slots=True)
class Import:
    path: str  # the importing file, relative to the root
    line: int
    module: str  # the module imported, absolute


def imports_of(path: Path, module: str) -> list[tuple[int, str]]:
    """Every module ``path`` imports, absolute (relative imports resolved against ``module``,
    the dotted name of the file itself)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module.split(".")[:-1]  # a package's own ``__init__`` is named ``X.__init__``
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                found.append((node.lineno, node.module))
            elif node.level > 0:
                base = package[: len(package) - (node.level - 1)]
                found.append((node.lineno, ".".join(base + ([node.module] if node.module else []))))
    return found


def sources(root: Path) -> list[tuple[Path, str]]:
    """First-party sources with their dotted module names; generated code left out."""
    found = []
    for path in sorted(root.glob("rungar/**/*.py")):
        rel = path.relative_to(root)
        if "_gen" not in rel.parts:
            found.append((path, ".".join(rel.with_suffix("").parts)))
    for folder in PROVIDER_SOURCES:
        base = root / folder
        for path in sorted(base.glob("**/*.py")):
            rel = path.relative_to(base.parent)
            found.append((path, ".".join(rel.with_suffix("").parts)))
    return found


def package_of(module: str) -> str | None:
    """The package a module belongs to for layering: ``rungar.X`` (a subpackage or a top-level
    module) or a provider package; None for anything else (the stdlib, libraries)."""
    parts = module.split(".")
    if parts[0] == "rungar":
        # ``rungar/__init__.py`` is the distribution's face, not a package of its own
        return ".".join(parts[:2]) if len(parts) > 1 and parts[1] != "__init__" else None
    if parts[0] in ("runnerd", "rungar_gcp", "rungar_aws"):
        return parts[0]
    return None


def layer_of(package: str) -> int | None:
    for index, layer in enumerate(LAYERS):
        if package in layer:
            return index
    return None


def dependencies(root: Path) -> dict[str, dict[str, list[Import]]]:
    """package -> package it imports -> the imports that make it so."""
    graph: dict[str, dict[str, list[Import]]] = defaultdict(lambda: defaultdict(list))
    for path, module in sources(root):
        source = package_of(module)
        if source is None:
            continue
        graph[source]  # a package that imports nothing still counts
        for line, imported in imports_of(path, module):
            target = package_of(imported)
            if target is not None and target != source:
                rel = path.relative_to(root).as_posix()
                graph[source][target].append(Import(rel, line, imported))
    return graph


def cycles(graph: dict[str, dict[str, list[Import]]]) -> list[list[str]]:
    """One cycle through each group of packages that reach each other (Tarjan's strongly
    connected components), as the packages in order with the first repeated at the end."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, {})):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_cycle_in(group, graph) for group in sorted(groups)]


def _cycle_in(group: list[str], graph: dict[str, dict[str, list[Import]]]) -> list[str]:
    """The shortest way from the group's first package back to itself, inside the group."""
    start = group[0]
    members = set(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for succ in sorted(graph.get(node, {})):
                if succ == start:
                    return [*paths[node], start]
                if succ in members and succ not in paths:
                    paths[succ] = [*paths[node], succ]
                    following.append(succ)
        frontier = following
    return [*group, start]  # unreachable: a strongly connected group has a way back


def layer_problems(graph: dict[str, dict[str, list[Import]]]) -> list[str]:
    problems = []
    for source in sorted(graph):
        source_layer = layer_of(source)
        if source_layer is None:
            first = next(iter(graph[source].values()), [])
            where = first[0].path if first else source
            problems.append(f"{where}: package {source} has no layer in tools/check_layers.py")
            continue
        for target, found in sorted(graph[source].items()):
            target_layer = layer_of(target)
            if target_layer is not None and target_layer >= source_layer:
                for imp in found:
                    problems.append(
                        f"{imp.path}:{imp.line}: {source} may not import {imp.module} "
                        f"({target} is not below it)"
                    )
    return problems


def cycle_problems(
    graph: dict[str, dict[str, list[Import]]], what: str = "dependency"
) -> list[str]:
    problems = []
    for cycle in cycles(graph):
        lines = [f"{what} cycle: {' -> '.join(cycle)}"]
        for source, target in itertools.pairwise(cycle):
            imp = graph[source][target][0]
            lines.append(f"  {imp.path}:{imp.line}: {source} imports {imp.module}")
        problems.append("\n".join(lines))
    return problems


def _imported(path: Path, module: str) -> list[tuple[int, list[str]]]:
    """Each import of ``path`` with what it may name: ``from P import a, b`` may name the
    modules ``P.a`` and ``P.b``, else ``P`` itself."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module.split(".")[:-1]
    found: list[tuple[int, list[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, [alias.name]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                base = node.module or ""
            else:
                parts = package[: len(package) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            found += [(node.lineno, [f"{base}.{alias.name}", base]) for alias in node.names]
    return found


def module_dependencies(root: Path) -> dict[str, dict[str, list[Import]]]:
    """module -> first-party module it imports -> the imports that make it so; a package's
    ``__init__`` is the module named as the package."""
    files = {module.removesuffix(".__init__"): (path, module) for path, module in sources(root)}

    def resolve(name: str) -> str | None:
        while name:
            if name in files:
                return name
            name = name.rpartition(".")[0]
        return None

    graph: dict[str, dict[str, list[Import]]] = defaultdict(lambda: defaultdict(list))
    for name, (path, module) in files.items():
        graph[name]  # a module that imports nothing still counts
        rel = path.relative_to(root).as_posix()
        for line, candidates in _imported(path, module):
            target = next((t for t in map(resolve, candidates) if t is not None), None)
            own_package = target is not None and name.startswith(target + ".")
            if target is None or target == name or own_package:
                continue
            graph[name][target].append(Import(rel, line, target))
    return graph


def module_problems(root: Path) -> list[str]:
    problems = []
    for path, module in sources(root):
        rel = path.relative_to(root).as_posix()
        pure = any(rel.startswith(p + "/") or rel == p + ".py" for p in PURE)
        if pure:
            problems += [f"{rel}:{line}: {what}" for line, what in pure_problems(path, module)]
        for line, imported in imports_of(path, module):
            top = imported.split(".")[0]
            if top in ("grpc", "grpc_health", "grpc_reflection") and not any(
                rel.startswith(a + "/") for a in GRPC_ALLOWED
            ):
                problems.append(f"{rel}:{line}: only rungar/rpc may import {imported}")
    return problems


def _io(name: str) -> bool:
    return name in IO_MODULES or name.split(".")[0] in IO_MODULES


def pure_problems(path: Path, module: str) -> list[tuple[int, str]]:
    """What a pure module may not do: import an I/O library, a clock or logging (in any import
    form), read the wall clock through datetime, or draw from a global random source."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[int, str]] = []
    datetime_modules: set[str] = set()  # local names of the datetime module
    datetime_classes: set[str] = set()  # local names of datetime.datetime and datetime.date
    random_modules: set[str] = set()  # local names of the random module
    for line, names in _imported(path, module):
        # ``from P import a``: the module ``P.a`` when there is one, else the name a of P.
        if any(_io(name) for name in names):
            found.append((line, f"pure module imports {names[0]}"))
        elif names[0].startswith("random.") and names[0] != "random.Random":
            found.append((line, f"pure module imports {names[0]} (a global random source)"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name
                if alias.name == "datetime":
                    datetime_modules.add(local)
                elif alias.name == "random":
                    random_modules.add(local)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            for alias in node.names:
                if node.module == "datetime" and alias.name in ("datetime", "date"):
                    datetime_classes.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        owner = node.value
        if isinstance(owner, ast.Name) and owner.id in random_modules and node.attr != "Random":
            found.append(
                (node.lineno, f"pure module uses random.{node.attr} (a global random source)")
            )
        if node.attr not in CLOCK_CALLS:
            continue
        reads_clock = (isinstance(owner, ast.Name) and owner.id in datetime_classes) or (
            isinstance(owner, ast.Attribute)
            and owner.attr in ("datetime", "date")
            and isinstance(owner.value, ast.Name)
            and owner.value.id in datetime_modules
        )
        if reads_clock:
            found.append((node.lineno, f"pure module reads the clock: {ast.unparse(node)}()"))
    return sorted(found)


def _engine_room(module: str, packages: set[str]) -> str | None:
    """The engine room a module is in (``rungar.engine.<room>``, a package, or a module of it);
    None for a module outside the engine; "" for the engine's own face (its ``__init__`` and the
    modules beside the rooms, such as ``rungar.engine.engine``)."""
    if module != ENGINE and not module.startswith(ENGINE + "."):
        return None
    parts = module.split(".")
    if len(parts) > 3 or (len(parts) == 3 and module in packages):
        return parts[2]
    return ""


def room_problems(root: Path) -> list[str]:
    packages = {m.removesuffix(".__init__") for _, m in sources(root) if m.endswith(".__init__")}
    problems = []
    for name, targets in sorted(module_dependencies(root).items()):
        room = _engine_room(name, packages)
        if not room:
            continue
        if room not in ENGINE_ROOMS:
            problems.append(f"{name}: engine room {room} has no place in tools/check_layers.py")
            continue
        for target, found in sorted(targets.items()):
            other = _engine_room(target, packages)
            if other is None or other == room:
                continue
            if other in ENGINE_ROOMS and ENGINE_ROOMS.index(other) < ENGINE_ROOMS.index(room):
                continue
            for imp in found:
                problems.append(
                    f"{imp.path}:{imp.line}: the engine's {room} may not import {target} "
                    f"({other or 'the engine itself'} is not below it)"
                )
    return problems


def check(root: Path) -> list[str]:
    graph = dependencies(root)
    modules = cycle_problems(module_dependencies(root), "module")
    rooms = room_problems(root)
    return module_problems(root) + cycle_problems(graph) + modules + layer_problems(graph) + rooms


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the tree to check")
    args = parser.parse_args(argv)
    problems = check(args.root)
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
