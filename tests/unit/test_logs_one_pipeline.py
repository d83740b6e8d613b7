"""Every line a process of the project writes is JSON when JSON is configured, and redacted.

Libraries log through the standard library (uvicorn, asyncio, grpc's Python side, warnings);
``rungar.logs.configure`` routes them through the same structlog pipeline as the project's own
lines. runnerd and the cloud plugins configure logging the same way. Each case runs in a fresh
interpreter, since logging is configured once per process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from rungar import logs

GITHUB_TOKEN = "ghp_" + "A1b2C3d4" * 5
JIT_LIKE = "eyJ" + "QUJDRGVmZ2hpamtsbW5vcA" * 10  # base64 as long as a JIT config's start


def run(code: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stderr.splitlines()


def test_library_lines_are_json_and_have_credentials_blanked() -> None:
    lines = run(
        f"""
        import asyncio, logging, os, warnings
        os.environ.pop("GRPC_VERBOSITY", None)
        from rungar import logs
        logs.configure("info", "json")
        assert os.environ["GRPC_VERBOSITY"] == "NONE"  # its C core cannot write JSON
        logging.getLogger("uvicorn.error").warning("auth failed for token {GITHUB_TOKEN}")
        logging.getLogger("grpc._cython.cygrpc").error("Authorization: Bearer s3cr3t-value")
        async def boom():
            raise RuntimeError("jit {JIT_LIKE}")
        async def main():
            asyncio.get_running_loop().create_task(boom())
            await asyncio.sleep(0.05)
        asyncio.run(main())
        import gc; gc.collect()  # the unretrieved task's exception is logged by asyncio
        warnings.warn("deprecated thing")
        """
    )
    parsed = [json.loads(line) for line in lines]  # a line that is not JSON fails here
    by_logger = {line.get("logger"): line for line in parsed}
    assert set(by_logger) >= {"uvicorn.error", "grpc._cython.cygrpc", "asyncio", "py.warnings"}
    text = "\n".join(lines)
    assert GITHUB_TOKEN not in text and "s3cr3t-value" not in text and JIT_LIKE not in text
    assert logs.REDACTED in by_logger["uvicorn.error"]["event"]
    assert by_logger["asyncio"]["level"] == "error"
    assert "RuntimeError" in by_logger["asyncio"]["exception"]  # the traceback, inside JSON


def test_the_projects_own_lines_and_library_lines_share_the_stamp_and_level_keys() -> None:
    lines = run(
        """
        import logging, structlog
        from rungar import logs
        logs.configure("info", "json")
        structlog.get_logger("rungar.x").info("own.line", token="t0ps3cret")
        logging.getLogger("uvicorn.error").info("library line")
        logging.getLogger("uvicorn.access").info("GET / 200")  # below warning: not logged
        """
    )
    own, library = (json.loads(line) for line in lines)
    assert own["token"] == logs.REDACTED
    assert set(own) >= {"timestamp", "level", "event"} and set(library) >= set(own) - {"token"}


def test_runnerd_configures_logging_like_rungar_with_redaction() -> None:
    lines = run(
        """
        import logging, os, structlog
        os.environ["RUNNERD_LOG_FORMAT"] = "json"
        os.environ.pop("GRPC_VERBOSITY", None)
        from runnerd.cli import _configure_logs
        _configure_logs()
        assert "GRPC_VERBOSITY" not in os.environ  # runners inherit it: left alone
        structlog.get_logger("runnerd.x").info("runner.started", jit_config="SECRET-JIT")
        logging.getLogger("uvicorn.error").warning("library line")
        """
    )
    own, library = (json.loads(line) for line in lines)
    assert own["jit_config"] == logs.REDACTED and library["event"] == "library line"


def test_a_cloud_plugin_configures_logging_before_anything_else() -> None:
    lines = run(
        """
        import logging, os, structlog
        os.environ["RUNGAR_LOG_FORMAT"] = "json"
        os.environ.pop("RUNGAR_PLUGIN_SETTINGS", None)
        from rungar.cloudkit.serve import run_provider_server
        code = run_provider_server("p", "d", lambda raw: raw, lambda s: None, argv=[])
        assert code == 2  # no settings: refused, after logging was configured
        structlog.get_logger("rungar_gcp").info("instance.created", token="SECRET-T")
        logging.getLogger("google.auth").warning("library line")
        """
    )
    json_lines = [json.loads(line) for line in lines if line.startswith("{")]
    assert [x["event"] for x in json_lines] == ["instance.created", "library line"]
    assert json_lines[0]["token"] == logs.REDACTED


def test_httpx_logs_no_line_per_request_but_keeps_its_warnings() -> None:
    lines = run(
        """
        import logging
        from rungar import logs
        logs.configure("info", "json")
        logging.getLogger("httpx").info('HTTP Request: POST https://api.github.com/x "201"')
        logging.getLogger("httpx").warning("something went wrong")
        """
    )
    assert [json.loads(line)["event"] for line in lines] == ["something went wrong"]
