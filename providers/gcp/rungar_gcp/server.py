"""``rungar-provider-gcp``: the gcp provider served over the provider protocol (README).

Its settings are the keys of :mod:`rungar_gcp.settings`, handed over by Rungar from
scale_sets.yaml and/or read from ``--config``; options, serving and exit codes are
:mod:`rungar.cloudkit.serve`'s. google-cloud-compute is imported only once the
settings are read and the provider is opened.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence

from rungar.cloudkit.serve import run_provider_server


def main(argv: Sequence[str] | None = None) -> int:
    from rungar_gcp.provider import open_gcp_provider  # google-cloud-compute only when opened
    from rungar_gcp.settings import GcpSettings

    return run_provider_server(
        "rungar-provider-gcp",
        __doc__.splitlines()[0],
        GcpSettings.parse,
        open_gcp_provider,
        argv,
    )


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
