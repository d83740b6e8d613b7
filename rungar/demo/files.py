"""Where the demo's and examples' files are: ``examples/`` of a source checkout, or where an
installed copy put them (``<prefix>/share/rungar/examples``, from the wheel's data files)."""

from __future__ import annotations

import sys
import sysconfig
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2] / "examples"


def examples_root() -> Path:
    """The folder holding ``demo/`` and the numbered examples."""
    if (SOURCE / "demo").is_dir():
        return SOURCE
    for base in (sysconfig.get_path("data"), sys.prefix):
        installed = Path(base) / "share" / "rungar" / "examples"
        if (installed / "demo").is_dir():
            return installed
    return SOURCE  # missing everywhere: the error that follows names the source folder
