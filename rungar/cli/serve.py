"""``rungar serve -c rungar.yaml``: run the daemon until SIGTERM; runners are left in place."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from rungar.errors import ConfigError


def add_parser(subparsers: Any, name: str, help_text: str) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(name, help=help_text)
    parser.add_argument("-c", "--config", required=True, help="the daemon's rungar.yaml")


def run(args: argparse.Namespace) -> int:
    from rungar.stopping import exit_until_serving

    # A signal before the daemon runs: nothing to stop, exit 0. The daemon makes nothing before
    # its loop takes the signals over, so nothing needs unwinding on the way out.
    restore = exit_until_serving(unwound=False)
    try:
        return _serve(args)
    finally:
        restore()


def _serve(args: argparse.Namespace) -> int:
    from rungar import logs
    from rungar.daemon.daemon import Daemon
    from rungar.daemon.malloc import set_for_a_daemon
    from rungar.daemon.settings import load_settings
    from rungar.testing.fake_provider import with_fake

    set_for_a_daemon()  # before a provider's first answer (rungar.daemon.malloc)
    try:
        settings = load_settings(args.config)
        logs.configure(settings.log_level, settings.log_format)
        # ``type: fake`` (the examples, the tests) runs in the daemon's own process
        path = os.path.abspath(args.config)
        asyncio.run(Daemon(settings, kinds=with_fake(), settings_path=path).run())
    except ConfigError as e:
        for problem in e.problems:
            print(problem, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
    except Exception as e:  # what the start made is stopped: one line says why (exit 1)
        import structlog

        structlog.get_logger("rungar.serve").debug("daemon.failed", exc_info=True)
        print(f"rungar serve: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0
