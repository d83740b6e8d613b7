"""Build the wheel and the sdist into a folder, offline: the PEP 517 hooks of the setuptools
already installed, with no isolated build environment to download.

Usage: ``python tools/build_dist.py [OUT]`` (default ``dist``); prints each file it made.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def build(out: Path) -> list[Path]:
    """Both distributions of the checkout at ROOT, written to ``out``; their paths."""
    from setuptools import build_meta  # type: ignore[import-untyped]  # setuptools ships no stubs

    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    here = Path.cwd()
    left = {p.name for p in [ROOT / "build", *ROOT.glob("*.egg-info")] if p.exists()}
    os.chdir(ROOT)
    try:
        with tempfile.TemporaryDirectory() as scratch:
            sdist = build_meta.build_sdist(scratch)
            wheel = build_meta.build_wheel(scratch)
            made = []
            for name in (wheel, sdist):
                shutil.move(os.path.join(scratch, name), out / name)
                made.append(out / name)
    finally:  # what the build left behind goes; what was there before stays
        for made_here in [ROOT / "build", *ROOT.glob("*.egg-info")]:
            if made_here.name not in left:
                shutil.rmtree(made_here, ignore_errors=True)
        os.chdir(here)
    return made


def main(argv: list[str]) -> int:
    for path in build(Path(argv[0] if argv else "dist")):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
