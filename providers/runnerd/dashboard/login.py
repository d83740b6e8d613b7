"""``runnerctl dashboard``: the dashboard's address, with the login token where it takes one.

On loopback the token is runnerd's own, in ``state_dir/dashboard.token``, readable by
runnerd's user only: run it as that user (root under ``runnerd.service``). With ``--socket``
and no config file, the running runnerd is asked for the link over its API socket (0600, the
same user): ``GET /dashboard``. Register it with ``add_dashboard_command(subparsers)``; the
parser sets ``func(args) -> int``.
"""

from __future__ import annotations

import argparse
import os
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


def token_path(host: HostConfig) -> Path:
    return Path(host.state_dir) / "dashboard.token"


def login_link(host: HostConfig) -> str:
    """``http://127.0.0.1:7477/?token=…``; raises OSError when the token cannot be read."""
    address, port = split_address(host.dashboard_listen)
    shown = f"[{address}]" if ":" in address else address
    if is_loopback(host.dashboard_listen):
        token = token_path(host).read_text().strip()
        return f"http://{shown}:{port}/?token={token}"
    if host.tls_ca:
        return f"https://{shown}:{port}/  (with a client certificate from {host.tls_ca})"
    token = Path(host.token_file).read_text().strip()
    return f"https://{shown}:{port}/?token={token}"


def asked_of_the_daemon(socket: str) -> int:
    """``runnerctl --socket S dashboard``: the link from the runnerd serving on ``S``."""
    import httpx

    transport = httpx.HTTPTransport(uds=socket)
    try:
        with httpx.Client(transport=transport, base_url="http://runnerd", timeout=10.0) as c:
            answer = c.get("/dashboard").json()
    except (httpx.HTTPError, ValueError) as e:
        print(f"runnerctl dashboard: runnerd does not answer on {socket}: {e}", file=sys.stderr)
        return 1
    if answer.get("error"):
        print(f"runnerctl dashboard: {answer['error']}", file=sys.stderr)
        return 1
    if not answer.get("link"):
        print('runnerd serves no dashboard: set [host] dashboard_listen = "127.0.0.1:7477"')
        return 1
    print(answer["link"])
    return 0


def run_dashboard(args: argparse.Namespace) -> int:
    if args.socket and not os.path.exists(args.config):
        return asked_of_the_daemon(args.socket)
    try:
        host = load_config(args.config).host
    except ConfigError as e:
        print("\n".join(e.problems), file=sys.stderr)
        if not args.socket:
            print(
                "runnerctl dashboard: name runnerd's config (-c runnerd.toml) or its API socket "
                "(--socket state_dir/runnerd.sock)",
                file=sys.stderr,
            )
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
