"""No open runnerd port: a TCP provider listener needs client authentication (README
"Securing the provider channel").

The matrix, for runnerd's config and for the server kit every provider is served with:
plaintext TCP is refused; TLS alone (the server proves itself, nobody else does) is refused,
naming the two ways to authenticate clients; TLS with a client CA or a token serves only
clients that pass; and the explicit opt-out serves anyone, warned at every start. Before the
rule, TLS alone passed ``runnerd check-config`` and served Info, List, Create and Delete to an
anonymous TLS client.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import trustme
from runnerd.daemon import check_config
from structlog.testing import capture_logs

from rungar.errors import ConfigError, ProviderError, ProviderUnavailable
from rungar.rpc.client import GrpcProvider
from rungar.rpc.server import serve
from rungar.rpc.tls import ClientTls, ServerTls
from rungar.testing.fake_provider import FakeProvider
from tests.waiting import WAIT

SERVER_NAME = "runnerd.test"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp / "ca.pem"))
    cert = ca.issue_cert(SERVER_NAME)
    cert.cert_chain_pems[0].write_to_path(str(tmp / "server.pem"))
    cert.private_key_pem.write_to_path(str(tmp / "server.key"))
    (tmp / "token").write_text("a-long-random-token")
    (tmp / "token").chmod(0o600)
    return {
        "ca": str(tmp / "ca.pem"),
        "cert": str(tmp / "server.pem"),
        "key": str(tmp / "server.key"),
        "token": str(tmp / "token"),
    }


def runnerd_toml(tmp_path: Path, host_lines: str) -> Path:
    path = tmp_path / "runnerd.toml"
    path.write_text(
        f"""[host]
slice = "rdauth{uuid.uuid4().hex[:8]}.slice"
memory_max = "1G"
cpus = 2
state_dir = "{tmp_path / "state"}"
{host_lines}

[profiles.node]
command = [{json.dumps(sys.executable)}, "-c", "pass"]
cpus = 1
memory = "256M"
slots = 2
"""
    )
    return path


def tls_lines(pki: dict[str, str], *extra: str) -> str:
    return "\n".join(
        [
            'listen = "127.0.0.1:7443"',
            f'tls_cert = "{pki["cert"]}"',
            f'tls_key = "{pki["key"]}"',
            *extra,
        ]
    )


def test_plaintext_tcp_is_refused_by_check_config(tmp_path: Path) -> None:
    problems, _ = check_config(str(runnerd_toml(tmp_path, 'listen = "127.0.0.1:7443"')))
    assert any("host.listen: gRPC over TCP needs tls_cert and tls_key" in p for p in problems)


def test_tls_without_a_client_ca_or_token_is_refused_naming_both_keys(
    tmp_path: Path, pki: dict[str, str]
) -> None:
    problems, _ = check_config(str(runnerd_toml(tmp_path, tls_lines(pki))))
    assert len(problems) == 1, problems
    assert "runnerd.toml:6:1: host.listen: gRPC over TCP needs client authentication" in problems[0]
    assert "tls_ca" in problems[0] and "token_file" in problems[0]
    assert "insecure_no_client_auth = true" in problems[0]


@pytest.mark.parametrize(
    "extra",
    [
        ("tls_ca",),
        ("token_file",),
        ("insecure_no_client_auth = true",),
    ],
)
def test_tls_with_client_authentication_or_the_explicit_opt_out_passes(
    tmp_path: Path, pki: dict[str, str], extra: tuple[str]
) -> None:
    line = {
        "tls_ca": f'tls_ca = "{pki["ca"]}"',
        "token_file": f'token_file = "{pki["token"]}"',
    }.get(extra[0], extra[0])
    assert check_config(str(runnerd_toml(tmp_path, tls_lines(pki, line))))[0] == []


def test_the_opt_out_must_be_a_boolean(tmp_path: Path, pki: dict[str, str]) -> None:
    problems, _ = check_config(
        str(runnerd_toml(tmp_path, tls_lines(pki, 'insecure_no_client_auth = "yes"')))
    )
    assert any("host.insecure_no_client_auth: 'yes' is not true or false" in p for p in problems)


def test_runnerd_check_config_and_serve_exit_2_on_tls_only(
    tmp_path: Path, pki: dict[str, str]
) -> None:
    config = runnerd_toml(tmp_path, tls_lines(pki))
    for command in ("check-config", "serve"):
        done = subprocess.run(
            [sys.executable, "-m", "runnerd.cli", command, "-c", str(config)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 2, (command, done.stderr)
        assert "needs client authentication" in done.stderr and "tls_ca" in done.stderr


async def call_everything(address: str, tls: ClientTls) -> None:
    client = GrpcProvider("runnerd", address, tls=tls, timeout=WAIT)
    try:
        await client.info()
        await client.list({})
        await client.delete("someone-elses-runner")
    finally:
        await client.close()


@pytest.mark.parametrize("how", ["mtls", "token"])
async def test_an_anonymous_tls_client_is_refused_by_a_server_that_authenticates(
    pki: dict[str, str], how: str
) -> None:
    fake = FakeProvider("host")
    if how == "mtls":
        tls = ServerTls(pki["cert"], pki["key"], pki["ca"])
        server = await serve(fake, "127.0.0.1:0", tls=tls)
    else:
        token = Path(pki["token"]).read_text()
        server = await serve(
            fake, "127.0.0.1:0", tls=ServerTls(pki["cert"], pki["key"]), token=token
        )
    try:
        with pytest.raises((ProviderUnavailable, ProviderError)):
            await call_everything(server.address, ClientTls(pki["ca"], server_name=SERVER_NAME))
    finally:
        await server.stop(None)
    assert sum(fake.calls.values()) == 0


async def test_the_server_kit_refuses_to_serve_tcp_with_tls_alone(pki: dict[str, str]) -> None:
    with pytest.raises(ConfigError) as refused:
        await serve(FakeProvider("host"), "127.0.0.1:0", tls=ServerTls(pki["cert"], pki["key"]))
    assert "needs client authentication" in refused.value.problems[0]
    assert "client CA" in refused.value.problems[0] and "token" in refused.value.problems[0]


async def test_the_opt_out_serves_anyone_and_says_so_at_every_start(pki: dict[str, str]) -> None:
    fake = FakeProvider("host")
    for _ in range(2):
        with capture_logs() as lines:
            server = await serve(
                fake,
                "127.0.0.1:0",
                tls=ServerTls(pki["cert"], pki["key"]),
                insecure_no_client_auth=True,
            )
        try:
            await call_everything(server.address, ClientTls(pki["ca"], server_name=SERVER_NAME))
        finally:
            await server.stop(None)
        warnings = [x for x in lines if x["event"] == "provider.insecure_no_client_auth"]
        assert [x["log_level"] for x in warnings] == ["warning"]
    assert fake.calls["info"] == 2 and fake.calls["delete"] == 2


def test_runnerd_serve_with_the_opt_out_warns_when_it_starts(
    tmp_path: Path, pki: dict[str, str]
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    lines = tls_lines(pki, "insecure_no_client_auth = true").replace("7443", str(port))
    config = runnerd_toml(tmp_path, lines)
    daemon = subprocess.Popen(
        [sys.executable, "-m", "runnerd.cli", "serve", "-c", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "RUNNERD_LOG_FORMAT": "json"},
    )
    assert daemon.stderr is not None
    try:
        seen = []
        for line in daemon.stderr:  # ends when the daemon does: a refused start ends it
            seen.append(json.loads(line))
            if seen[-1]["event"] in ("provider.insecure_no_client_auth", "runnerd.serving"):
                break
    finally:
        daemon.terminate()
        daemon.wait(30)
    assert seen[-1]["event"] == "provider.insecure_no_client_auth", seen
    assert seen[-1]["level"] == "warning" and seen[-1]["address"] == f"127.0.0.1:{port}"
