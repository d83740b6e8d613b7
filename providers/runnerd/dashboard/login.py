"""``runnerctl dashboard``: the dashboard's address, with the login token where it takes one.

On loopback the token is runnerd's own, in ``state_dir/dashboard.token``, readable by
runnerd's user only: run it as that user (root under ``runnerd.service``). Register it with
``add_dashboard_command(subparsers)``; the parser sets ``func(args) -> int``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rungar.errors import ConfigError
from runnerd.config import HostConfig, is_loopback, load_config, split_address


def add_dashboard_command(subparsers: Any) -> None:
    dashboard = subparsers.add_parser(
        "dashboard", help="the dashboard's login link (dashboard_listen)"
    )
    dashboard.set_defaults(func=run_dashboard)


def login_link(host: HostConfig) -> str:
    """``http://127.0.0.1:7477/?token=…``; raises OSError when the token cannot be read."""
    from runnerd.dashboard.server import token_path

    address, port = split_address(host.dashboard_listen)
    shown = f"[{address}]" if ":" in address else address
    if is_loopback(host.dashboard_listen):
        token = token_path(host).read_text().strip()
        return f"http://{shown}:{port}/?token={token}"
    if host.tls_ca:
        return f"https://{shown}:{port}/  (with a client certificate from {host.tls_ca})"
    token = Path(host.token_file).read_text().strip()
    return f"https://{shown}:{port}/?token={token}"


def run_dashboard(args: argparse.Namespace) -> int:
    try:
        host = load_config(args.config).host
    except ConfigError as e:
        print("\n".join(e.problems), file=sys.stderr)
        return 2
    if not host.dashboard_listen:
        print(f'{args.config}: no dashboard: set [host] dashboard_listen = "127.0.0.1:7477"')
        return 1
    try:
        print(login_link(host))
    except OSError as e:
        print(
            f"runnerctl dashboard: cannot read the dashboard's token ({e.strerror}): run it as "
            "runnerd's user, once runnerd has served the dashboard",
            file=sys.stderr,
        )
        return 1
    return 0
