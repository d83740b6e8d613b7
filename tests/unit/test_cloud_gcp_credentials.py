"""The credentials the gcp provider's Compute Engine clients are built with: a key file or
application default credentials, impersonating a service account when asked, and no network
call until the first API call (google-auth fetches tokens lazily)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from google.auth import impersonated_credentials
from google.oauth2 import credentials as user_credentials
from rungar_gcp.compute import CLOUD_PLATFORM, ComputeApi
from rungar_gcp.settings import GcpSettings

from rungar.errors import ConfigError

TARGET = "rungar@acme-ci.iam.gserviceaccount.com"


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a network call while building clients: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


@pytest.fixture
def key_file(tmp_path: Path) -> str:
    """Authorized-user credentials: loading them needs no private key and no call."""
    path = tmp_path / "user.json"
    path.write_text(
        json.dumps(
            {
                "type": "authorized_user",
                "client_id": "rungar-test-client",
                "client_secret": "not-a-secret",
                "refresh_token": "not-a-token",
            }
        )
    )
    return str(path)


def settings(**over: Any) -> GcpSettings:
    return GcpSettings.parse(
        {"project": "acme-ci", "zones": ["us-central1-a"], "installation": "gh-1", **over}
    )


def client_credentials(api: ComputeApi) -> Any:
    """The credentials of every client, checked to be one and the same."""
    clients = (api._instances, api._operations, api._machine_types)
    found = {id(c._transport._credentials): c._transport._credentials for c in clients}
    assert len(found) == 1, "the clients were built with different credentials"
    return next(iter(found.values()))


def test_the_clients_impersonate_the_service_account_with_the_key_file_as_source(
    key_file: str,
) -> None:
    api = ComputeApi(settings(credentials_file=key_file, impersonate_service_account=TARGET))
    creds = client_credentials(api)
    assert isinstance(creds, impersonated_credentials.Credentials)
    assert creds.service_account_email == TARGET
    assert creds._target_scopes == [CLOUD_PLATFORM]
    source = creds._source_credentials
    assert isinstance(source, user_credentials.Credentials)
    assert source.client_id == "rungar-test-client"


def test_application_default_credentials_are_the_source_without_a_key_file(
    key_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", key_file)
    creds = client_credentials(ComputeApi(settings(impersonate_service_account=TARGET)))
    assert isinstance(creds, impersonated_credentials.Credentials)
    assert creds._source_credentials.client_id == "rungar-test-client"


def test_without_impersonation_the_key_file_is_used_as_it_is(key_file: str) -> None:
    creds = client_credentials(ComputeApi(settings(credentials_file=key_file)))
    assert isinstance(creds, user_credentials.Credentials)
    assert creds.client_id == "rungar-test-client"


def _service_account_key(tmp_path: Path) -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    path = tmp_path / "sa.json"
    path.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": "acme-ci",
                "private_key_id": "k1",
                "private_key": pem,
                "client_email": "rungar@acme-ci.iam.gserviceaccount.com",
                "client_id": "1",
                "token_uri": "https://oauth2.googleapis.com/token",
            }
        )
    )
    return str(path)


def test_a_service_account_key_is_loaded_as_one_with_the_compute_scope(tmp_path: Path) -> None:
    from google.oauth2 import service_account

    api = ComputeApi(settings(credentials_file=_service_account_key(tmp_path)))
    # Each client's transport takes its own copy of service-account credentials (self-signed
    # JWT access), so each is checked.
    for client in (api._instances, api._operations, api._machine_types):
        creds = client._transport._credentials
        assert isinstance(creds, service_account.Credentials)
        assert creds.service_account_email == "rungar@acme-ci.iam.gserviceaccount.com"
        assert creds._scopes == [CLOUD_PLATFORM]


def test_a_workload_identity_file_is_loaded_as_an_identity_pool(tmp_path: Path) -> None:
    from google.auth import identity_pool

    path = tmp_path / "wif.json"
    path.write_text(
        json.dumps(
            {
                "type": "external_account",
                "audience": "//iam.googleapis.com/projects/1/locations/global/"
                "workloadIdentityPools/ci/providers/gh",
                "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
                "token_url": "https://sts.googleapis.com/v1/token",
                "credential_source": {"file": str(tmp_path / "token")},
            }
        )
    )
    creds = client_credentials(ComputeApi(settings(credentials_file=str(path))))
    assert isinstance(creds, identity_pool.Credentials)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ('{"type": "gdch_service_account"}', "type 'gdch_service_account' is not one of"),
        ("[1, 2]", "type None is not one of"),
        ("not json", "cannot read"),
        ('{"type": "service_account", "client_email": "x"}', "not valid service_account"),
    ],
)
def test_a_credentials_file_of_another_type_or_broken_is_refused_naming_the_key(
    tmp_path: Path, content: str, problem: str
) -> None:
    path = tmp_path / "creds.json"
    path.write_text(content)
    with pytest.raises(ConfigError) as refused:
        ComputeApi(settings(credentials_file=str(path)))
    assert refused.value.problems[0].startswith("credentials_file: ")
    assert problem in refused.value.problems[0]


def test_no_application_default_credentials_is_a_clear_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "absent.json"))
    with pytest.raises(ConfigError) as refused:
        ComputeApi(settings())
    assert refused.value.problems[0].startswith("credentials: ")
