"""``rungar-provider-aws``: the aws provider served over the provider protocol (README).

Settings of :mod:`rungar_aws.settings` keys (``region``, ``subnets``, ``installation`` …),
handed over by Rungar from scale_sets.yaml and/or read from ``--config``; ``--listen``, TLS,
the plugin socket and the exit codes (0 stopped, 2 configuration or usage error) work as
:mod:`rungar.cloudkit.serve` describes. boto3 loads with the provider.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence

from rungar.cloudkit.serve import run_provider_server


def main(argv: Sequence[str] | None = None) -> int:
    from rungar_aws.provider import open_aws_provider  # boto3 only when opened
    from rungar_aws.settings import AwsSettings

    return run_provider_server(
        "rungar-provider-aws",
        __doc__.splitlines()[0],
        AwsSettings.parse,
        open_aws_provider,
        argv,
    )


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
