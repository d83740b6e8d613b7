"""Import-layer check: pure packages import no I/O; only rungar/rpc imports grpc.

Exit 1 listing every offending import.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Packages whose modules make decisions only: no I/O libraries, no clock reads, no logging.
PURE = ["rungar/placement", "rungar/scaling", "rungar/model", "providers/runnerd/admission"]
IO_MODULES = {
    "asyncio.subprocess",
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
}
GRPC_ALLOWED = ["rungar/rpc", "rungar/testing", "providers", "tests", "benchmarks", "tools"]


def imports_of(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


def main() -> int:
    problems = []
    for path in sorted(ROOT.glob("rungar/**/*.py")) + sorted(ROOT.glob("providers/**/*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if "/_gen/" in rel:
            continue
        pure = any(rel.startswith(p + "/") or rel == p + ".py" for p in PURE)
        for line, module in imports_of(path):
            top = module.split(".")[0]
            if pure and (module in IO_MODULES or top in IO_MODULES):
                problems.append(f"{rel}:{line}: pure module imports {module}")
            if top in ("grpc", "grpc_health", "grpc_reflection") and not any(
                rel.startswith(a + "/") for a in GRPC_ALLOWED
            ):
                problems.append(f"{rel}:{line}: only rungar/rpc may import {module}")
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
