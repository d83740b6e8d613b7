"""``rungar-provider-aws``: the aws provider served over the provider protocol (ARCHITECTURE §1).

Settings come from a YAML or TOML file (the keys of :mod:`rungar_aws.settings`). Started by
Rungar as a plugin (``RUNGAR_PLUGIN_SOCKET`` set) it serves on that socket; otherwise
``--listen`` names a ``unix:///path`` or, with TLS, a ``host:port``. The file reading and
serving loop are the gcp provider's (:mod:`rungar_gcp.server`), which is pure Python and
imports no cloud SDK. Exit codes: 0 stopped, 2 configuration or usage error.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Sequence

from rungar.errors import ConfigError


def main(argv: Sequence[str] | None = None) -> int:
    from rungar_gcp.server import build_parser, read_settings_file, serve_until_stopped

    from rungar_aws.settings import AwsSettings

    args = build_parser("rungar-provider-aws").parse_args(argv)
    try:
        settings = AwsSettings.parse(read_settings_file(args.config))
    except ConfigError as e:
        print(f"rungar-provider-aws: {e}", file=sys.stderr)
        return 2
    except ValueError as e:
        print(f"rungar-provider-aws: {args.config}: {e}", file=sys.stderr)
        return 2

    async def run() -> None:
        from rungar_aws.provider import open_aws_provider

        provider = open_aws_provider(settings)
        try:
            await serve_until_stopped(provider, args)
        finally:
            provider.close()

    try:
        asyncio.run(run())
    except ConfigError as e:
        print(f"rungar-provider-aws: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
