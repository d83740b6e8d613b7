"""``rungar simulate``: replay a job history through the whole fleet on a virtual clock.

Reads a scale_sets.yaml, one or more job histories and a models file (or finds all three from a
fleet's own files: a ``rungar demo --keep`` folder or a daemon's ``-c`` settings, see
``rungar.simulate.discover``), replays the history as
configured (the baseline row), then once per what-if flag with that one thing changed, and
prints the table (or ``--json``). Nothing is contacted and nothing is changed. Exit 2 for a
configuration or usage problem, naming the file, line and key.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

EPILOG = """\
What is real and what is modelled:
  real      scaling (desired runners with schedules and warm pools, idle surplus), the warm
            pool's prediction from the jobs replayed so far, the placement fleet and its
            try-in-order loop (spread/pack, weights, limits, backoffs, priority holds,
            unreachable providers), and on runnerd hosts runnerd's admission decide() and its
            predictor.
  modelled  GitHub (a first-come queue per scale set; a connected idle runner takes the oldest
            job), the engine's triggers (a scale step per job queued or finished, and every
            reconcile_interval), runner boot times, clouds (a quota, a boot time, a price),
            scripted refusals and outages, and a runnerd host's slice (each running job held at
            its peak; past MemoryMax the kernel kills the largest job).
  left out  GitHub registration, start timeouts, adoption, the state store, host memory
            pressure and disk.
The same inputs give the same table, to the digit. The models file is described in
docs/simulate.md.
"""


def add_parser(subparsers: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name,
        help=help_text,
        description=help_text,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "config", metavar="SCALE_SETS",
        help=(
            "the scale_sets.yaml to replay, or a folder holding one (rungar demo --keep's), or "
            "a daemon's settings (rungar serve -c FILE): then the runnerd hosts' runnerd.toml, "
            "their histories and the profile mapping are found by themselves"
        ),
    )  # fmt: skip
    parser.add_argument(
        "--history", action="append", default=[], metavar="FILE",
        help=(
            "a runnerd history database or a .jsonl export (repeat for several hosts); "
            "default: the histories of the runnerd hosts found"
        ),
    )  # fmt: skip
    parser.add_argument("--models", metavar="FILE", help="what each provider is like")
    parser.add_argument(
        "--scale-set", action="append", default=[], metavar="LABEL=NAME",
        help="replay the history's jobs of LABEL (a scale set or profile) in scale set NAME",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    what_if = parser.add_argument_group("what-ifs (each adds a row)")
    what_if.add_argument("--placement", action="append", default=[], choices=["spread", "pack"])
    what_if.add_argument("--no-priority", action="store_true", help="every priority 0")
    what_if.add_argument(
        "--hold-one", action="store_true",
        help="the older priority rule: one full provider held, not every one (for comparison)",
    )  # fmt: skip
    what_if.add_argument(
        "--hold", action="append", default=[], choices=["every_full", "soonest_room"],
        help="every scale set with this hold: which full providers a priority holds",
    )  # fmt: skip
    what_if.add_argument(
        "--admission", action="append", default=[], choices=["caps", "measured"],
        help="every runnerd host with this admission",
    )  # fmt: skip
    what_if.add_argument(
        "--add-host", action="append", default=[], metavar="FILE",
        help="one more runnerd host, from its runnerd.toml, beside the first host",
    )  # fmt: skip
    what_if.add_argument("--remove-provider", action="append", default=[], metavar="NAME")
    what_if.add_argument("--max-runners", action="append", default=[], metavar="PROVIDER=N")
    what_if.add_argument(
        "--speed", action="append", default=[], type=float, metavar="N",
        help="the same jobs queued N times as fast",
    )  # fmt: skip
    what_if.add_argument(
        "--no-warm-pool", action="store_true",
        help="no scale set with a warm pool; the warm pool line compares it with the baseline",
    )  # fmt: skip
    what_if.add_argument(
        "--warm-pool", action="append", default=[], type=int, metavar="MAX",
        help="every scale set with warm_pool.max MAX (other keys as configured, else defaults)",
    )  # fmt: skip
    return parser


def run(args: argparse.Namespace) -> int:
    from rungar.errors import ConfigError
    from rungar.simulate.discover import discover
    from rungar.simulate.run import SimulateRequest, simulate

    mapping = {}
    for text in args.scale_set:
        label, _, name = text.partition("=")
        if not label or not name:
            print(f"rungar simulate: --scale-set {text}: must be LABEL=NAME", file=sys.stderr)
            return 2
        mapping[label] = name
    try:
        found = discover(args.config)
    except ConfigError as e:
        for problem in e.problems:
            print(problem, file=sys.stderr)
        return 2
    histories = tuple(args.history) or found.histories
    if not histories:
        print(
            f"rungar simulate: no job history found for {args.config}: no runnerd host of it "
            "has one here; give --history FILE",
            file=sys.stderr,
        )
        return 2
    for line in found.lines:
        print(f"rungar simulate: found {line}", file=sys.stderr)
    request = SimulateRequest(
        config=found.config,
        histories=histories,
        models=args.models or "",
        found=found.models,
        mapping=mapping,
        placements=tuple(args.placement),
        no_priority=args.no_priority,
        admissions=tuple(args.admission),
        add_hosts=tuple(args.add_host),
        removes=tuple(args.remove_provider),
        max_runners=tuple(args.max_runners),
        speeds=tuple(args.speed),
        no_warm_pool=args.no_warm_pool,
        warm_pools=tuple(args.warm_pool),
        hold_one=args.hold_one,
        holds=tuple(args.hold),
    )
    try:
        report = simulate(request)
    except ConfigError as e:
        for problem in e.problems:
            print(problem, file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.json, indent=2))
    else:
        print(report.text)
    return 0
