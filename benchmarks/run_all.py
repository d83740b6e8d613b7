"""``make bench``: run every benchmark in this folder and collect its JSON lines.

Each script runs standalone and prints one JSON object per line; this runner adds a timestamp
and writes them all to ``benchmarks/results.jsonl``. ``--quick`` passes ``--quick`` through.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", nargs="*", default=[])
    args = parser.parse_args()
    scripts = sorted(p for p in HERE.glob("*.py") if p.name != "run_all.py")
    if args.only:
        scripts = [p for p in scripts if p.stem in args.only]
    out = HERE / "results.jsonl"
    failed = 0
    with out.open("w") as results:
        for script in scripts:
            command = [sys.executable, str(script)] + (["--quick"] if args.quick else [])
            started = time.time()
            done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
            if done.returncode != 0:
                failed += 1
                print(f"{script.name} failed:\n{done.stderr[-2000:]}", file=sys.stderr)
                continue
            for line in done.stdout.splitlines():
                if not line.strip():
                    continue
                record = json.loads(line)
                record["at"] = round(started)
                results.write(json.dumps(record) + "\n")
                print(json.dumps(record))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
