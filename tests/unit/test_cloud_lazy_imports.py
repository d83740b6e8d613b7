"""The cloud SDKs are imported only when a cloud provider is opened.

``import google.cloud.compute_v1`` alone takes about a second; ``rungar --help`` and ``rungar
status`` must never pay it. Each check runs in a fresh interpreter so nothing imported by
other tests can hide an import.
"""

from __future__ import annotations

import json
import subprocess
import sys

SDKS = ("google.cloud", "google.cloud.compute_v1", "boto3", "botocore")

PROBE = """
import contextlib, io, json, sys
import rungar.cli.main as cli
with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
    cli.main(["--help"])
{extra}
print(json.dumps({{"loaded": [m for m in {sdks!r} if m in sys.modules]}}))
"""


def probe(extra: str = "") -> dict[str, object]:
    code = PROBE.format(extra=extra, sdks=SDKS)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_rungar_help_imports_no_cloud_sdk() -> None:
    """How long ``rungar --help`` takes is checked in tests/integration/test_cli_startup.py."""
    assert probe()["loaded"] == []


def test_the_provider_modules_import_no_sdk_until_a_provider_is_opened() -> None:
    extra = (
        "import rungar_gcp.provider, rungar_gcp.server, rungar_aws.provider, rungar_aws.server\n"
        "import rungar.testing.gce_fake"
    )
    assert probe(extra)["loaded"] == []


def test_opening_a_provider_is_what_imports_its_sdk() -> None:
    extra = (
        "from rungar_aws.provider import open_aws_provider\n"
        "from rungar_aws.settings import AwsSettings\n"
        "import os; os.environ.update(AWS_ACCESS_KEY_ID='x', AWS_SECRET_ACCESS_KEY='x')\n"
        "open_aws_provider(AwsSettings.parse({'region': 'eu-west-1', 'subnets': ['s'],"
        " 'installation': 'gh-1', 'endpoint_url': 'http://127.0.0.1:9'}))"
    )
    loaded = probe(extra)["loaded"]
    assert isinstance(loaded, list) and "boto3" in loaded and "google.cloud" not in loaded
