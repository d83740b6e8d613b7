"""google-cloud-compute behind :class:`rungar_gcp.api.GceApi`: the only module that imports it.

It is imported only by :func:`rungar_gcp.provider.open_gcp_provider`, never at package
import (the SDK takes about a second to import). Blocking SDK calls run in a
thread. Two traps of the SDK are avoided on purpose:

* ``operation.result()`` polls through a ``ZoneOperationsClient`` built without our
  ``client_options`` (it would poll compute.googleapis.com even against the local fake), and it
  reports success for an operation ``DONE`` with errors but no ``httpErrorStatusCode``; so the
  operation is waited on with our own ``ZoneOperationsClient.wait`` and its
  ``error.errors`` are read here.
* The exception class is chosen by HTTP status and says nothing of the cause: codes are read
  from ``exc.errors``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import google.auth
import google.auth.exceptions
import requests
from google.api_core import exceptions as gexc
from google.api_core.client_options import ClientOptions
from google.auth import aws, identity_pool, impersonated_credentials, pluggable
from google.auth.credentials import AnonymousCredentials
from google.cloud import compute_v1
from google.oauth2 import credentials as user_credentials
from google.oauth2 import service_account

from rungar.errors import ConfigError, ProviderError, ProviderUnavailable
from rungar_gcp.api import InsertFailure, Instance, InstanceSpec
from rungar_gcp.errors import Plane, error_codes
from rungar_gcp.labels import (
    LABELS_METADATA_KEY,
    NAME_METADATA_KEY,
    REQUEST_METADATA_KEY,
    decode_labels_metadata,
)
from rungar_gcp.settings import GcpSettings

T = TypeVar("T")
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
NO_ANSWER = (
    requests.exceptions.RequestException,
    google.auth.exceptions.TransportError,
    gexc.RetryError,
    TimeoutError,
)


def _last_segment(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[-1] if url else ""


def _without_url(message: str) -> str:
    """google-api-core prefixes REST errors with ``METHOD URL: ``; the cause is after it."""
    method, _, rest = message.partition(" ")
    if method in ("GET", "POST", "DELETE", "PATCH") and ": " in rest:
        return rest.split(": ", 1)[1]
    return message


def _timestamp(text: str) -> float:
    try:
        return datetime.fromisoformat(text).timestamp() if text else 0.0
    except ValueError:
        return 0.0


def api_credentials(settings: GcpSettings) -> Any:
    """The credentials the API is called with; nothing is fetched until the first call.
    Raises ``ConfigError`` naming the key when they cannot be had."""
    # google-auth ships partial annotations; these functions are untyped upstream.
    if settings.anonymous:
        # why the ignore[no-untyped-call] below: untyped upstream (comment above)
        return AnonymousCredentials()  # type: ignore[no-untyped-call]
    try:
        if settings.credentials_file:
            source = credentials_from_file(settings.credentials_file)
        else:
            source, _ = google.auth.default(scopes=[CLOUD_PLATFORM])
    except google.auth.exceptions.DefaultCredentialsError as e:
        key = "credentials_file" if settings.credentials_file else "credentials"
        raise ConfigError([f"{key}: {e}"]) from e
    if not settings.impersonate_service_account:
        return source
    # The source only needs to mint the target's tokens (roles/iam.serviceAccountTokenCreator
    # on it); every Compute Engine call is then made as the target.
    # why the ignore[no-untyped-call] below: untyped upstream in google-auth
    return impersonated_credentials.Credentials(  # type: ignore[no-untyped-call]
        source_credentials=source,
        target_principal=settings.impersonate_service_account,
        target_scopes=[CLOUD_PLATFORM],
    )


def credentials_from_file(path: str) -> Any:
    """Credentials of a type we expect, each loaded by its own type's method: a service-account
    key, workload identity federation (``external_account``: a token file or URL, AWS, or an
    executable) or an authorized user. Any other type is refused rather than trusted, which is
    what google-auth's generic loader warns about."""
    try:
        info = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise ConfigError([f"credentials_file: cannot read {path}: {e}"]) from e
    kind = info.get("type") if isinstance(info, dict) else None
    load: Any  # google-auth's loaders are untyped upstream
    if kind == "service_account":
        load = service_account.Credentials.from_service_account_info
    elif kind == "authorized_user":
        load = user_credentials.Credentials.from_authorized_user_info
    elif kind == "external_account":
        source = info.get("credential_source") or {}
        if "environment_id" in source:
            load = aws.Credentials.from_info
        elif "executable" in source:
            load = pluggable.Credentials.from_info
        else:
            load = identity_pool.Credentials.from_info
    else:
        raise ConfigError(
            [
                f"credentials_file: {path}: type {kind!r} is not one of service_account, "
                "external_account, authorized_user"
            ]
        )
    try:
        return load(info, scopes=[CLOUD_PLATFORM])
    except (ValueError, KeyError, google.auth.exceptions.GoogleAuthError) as e:
        raise ConfigError([f"credentials_file: {path}: not valid {kind} credentials: {e}"]) from e


class ComputeApi:
    """Compute Engine REST clients for one project (``GceApi``)."""

    def __init__(self, settings: GcpSettings) -> None:
        self._s = settings
        creds = api_credentials(settings)
        options = ClientOptions(api_endpoint=settings.endpoint) if settings.endpoint else None
        kwargs: dict[str, Any] = {"credentials": creds, "client_options": options}
        self._instances = compute_v1.InstancesClient(**kwargs)
        self._operations = compute_v1.ZoneOperationsClient(**kwargs)
        self._machine_types = compute_v1.MachineTypesClient(**kwargs)

    async def _call(self, fn: Callable[[], T]) -> T:
        return await asyncio.to_thread(fn)

    async def offers(self, zone: str, machine_type: str) -> bool | None:
        def get() -> bool | None:
            try:
                self._machine_types.get(
                    project=self._s.project,
                    zone=zone,
                    machine_type=machine_type,
                    timeout=self._s.timeout,
                )
            except gexc.NotFound:
                return False
            except (gexc.GoogleAPICallError, *NO_ANSWER):
                return None  # unknown: let the insert itself tell
            return True

        return await self._call(get)

    def _instance_body(self, spec: InstanceSpec) -> Any:
        zone_url = f"zones/{spec.zone}"
        body = compute_v1.Instance(
            name=spec.name,
            labels=dict(spec.labels),
            metadata=compute_v1.Metadata(
                items=[compute_v1.Items(key=k, value=v) for k, v in spec.metadata.items()]
            ),
        )
        if spec.machine_type:
            body.machine_type = f"{zone_url}/machineTypes/{spec.machine_type}"
        if spec.image:
            body.disks = [
                compute_v1.AttachedDisk(
                    boot=True,
                    auto_delete=True,
                    initialize_params=compute_v1.AttachedDiskInitializeParams(
                        source_image=spec.image,
                        disk_size_gb=spec.disk_gib,
                        disk_type=f"{zone_url}/diskTypes/{spec.disk_type}",
                    ),
                )
            ]
        if not spec.instance_template or spec.network or spec.subnetwork:
            nic = compute_v1.NetworkInterface()
            if spec.network:
                nic.network = spec.network
            if spec.subnetwork:
                nic.subnetwork = spec.subnetwork
            if spec.external_ip:
                nic.access_configs = [
                    compute_v1.AccessConfig(name="External NAT", type_="ONE_TO_ONE_NAT")
                ]
            body.network_interfaces = [nic]
        scheduling = compute_v1.Scheduling()
        if spec.spot:
            scheduling.provisioning_model = "SPOT"
            scheduling.instance_termination_action = "DELETE"
            scheduling.automatic_restart = False
            scheduling.on_host_maintenance = "TERMINATE"
        if spec.termination_time:
            scheduling.termination_time = spec.termination_time
            scheduling.instance_termination_action = "DELETE"
        if spec.spot or spec.termination_time:
            body.scheduling = scheduling
        if spec.network_tags:
            body.tags = compute_v1.Tags(items=list(spec.network_tags))
        if spec.service_account:
            body.service_accounts = [
                compute_v1.ServiceAccount(email=spec.service_account, scopes=list(spec.scopes))
            ]
        return body

    async def insert(self, spec: InstanceSpec, request_id: str) -> InsertFailure | None:
        request = compute_v1.InsertInstanceRequest(
            project=self._s.project,
            zone=spec.zone,
            instance_resource=self._instance_body(spec),
            request_id=request_id,
        )
        if spec.instance_template:
            request.source_instance_template = spec.instance_template
        return await self._call(lambda: self._insert_and_wait(request, spec.zone))

    def _insert_and_wait(self, request: Any, zone: str) -> InsertFailure | None:
        budget_end = time.monotonic() + self._s.timeout
        try:
            op = self._instances.insert(request=request, timeout=self._s.timeout)
            name, status = op.name, op.status
            done = compute_v1.Operation.Status.DONE
            while status != done:
                left = budget_end - time.monotonic()
                if left <= 0:
                    return InsertFailure(Plane.NO_ANSWER, message=f"operation {name} still running")
                op = self._operations.wait(
                    project=self._s.project, zone=zone, operation=name, timeout=left
                )
                status = op.status
        except gexc.GoogleAPICallError as e:
            codes = tuple(error_codes(e.errors))
            code = int(e.code) if isinstance(e.code, int) else None
            return InsertFailure(Plane.HTTP, codes, code, _without_url(str(e.message)))
        except NO_ANSWER as e:
            return InsertFailure(Plane.NO_ANSWER, message=type(e).__name__)
        errors = list(op.error.errors) if op.error else []
        if errors:
            codes = tuple(error_codes(errors))
            message = "; ".join(str(x.message) for x in errors if x.message)
            return InsertFailure(Plane.OPERATION, codes, op.http_error_status_code or None, message)
        return None

    def _to_instance(self, raw: Any) -> Instance:
        items = {i.key: i.value for i in raw.metadata.items} if raw.metadata else {}
        return Instance(
            name=raw.name,
            zone=_last_segment(raw.zone),
            status=raw.status,
            machine_type=_last_segment(raw.machine_type),
            labels=decode_labels_metadata(items.get(LABELS_METADATA_KEY)),
            request_id=items.get(REQUEST_METADATA_KEY, ""),
            runner_name=items.get(NAME_METADATA_KEY, ""),
            created_at=_timestamp(raw.creation_timestamp),
        )

    async def get(self, zone: str, name: str) -> Instance | None:
        def get() -> Instance | None:
            try:
                raw = self._instances.get(
                    project=self._s.project, zone=zone, instance=name, timeout=self._s.timeout
                )
            except gexc.NotFound:
                return None
            except gexc.GoogleAPICallError as e:
                raise ProviderError(f"instances.get {zone}/{name}: {e}") from e
            except NO_ANSWER as e:
                raise ProviderUnavailable(f"instances.get {zone}/{name}: {e}") from e
            return self._to_instance(raw)

        return await self._call(get)

    async def find(self, filter_text: str) -> list[Instance]:
        def find() -> list[Instance]:
            request = compute_v1.AggregatedListInstancesRequest(
                project=self._s.project, filter=filter_text
            )
            try:
                pages = self._instances.aggregated_list(request=request, timeout=self._s.timeout)
                return [
                    self._to_instance(raw)
                    for _, scoped in pages
                    for raw in (scoped.instances or ())
                ]
            except gexc.GoogleAPICallError as e:
                raise ProviderError(f"instances.aggregatedList: {e}") from e
            except NO_ANSWER as e:
                raise ProviderUnavailable(f"instances.aggregatedList: {e}") from e

        return await self._call(find)

    async def serial_output(self, zone: str, name: str) -> str:
        def read() -> str:
            try:
                answer = self._instances.get_serial_port_output(
                    project=self._s.project, zone=zone, instance=name, timeout=self._s.timeout
                )
            except gexc.NotFound:
                return ""
            except gexc.GoogleAPICallError as e:
                raise ProviderError(f"instances.getSerialPortOutput {zone}/{name}: {e}") from e
            except NO_ANSWER as e:
                raise ProviderUnavailable(
                    f"instances.getSerialPortOutput {zone}/{name}: {e}"
                ) from e
            return str(answer.contents or "")

        return await self._call(read)

    async def delete(self, zone: str, name: str, request_id: str) -> None:
        def delete() -> None:
            request = compute_v1.DeleteInstanceRequest(
                project=self._s.project, zone=zone, instance=name, request_id=request_id
            )
            try:
                op = self._instances.delete(request=request, timeout=self._s.timeout)
                if op.status != compute_v1.Operation.Status.DONE:
                    # The delete is accepted; waiting for it is best effort within the timeout.
                    self._operations.wait(
                        project=self._s.project,
                        zone=zone,
                        operation=op.name,
                        timeout=self._s.timeout,
                    )
            except gexc.NotFound:
                return
            except gexc.GoogleAPICallError as e:
                raise ProviderError(f"instances.delete {zone}/{name}: {e}") from e
            except NO_ANSWER as e:
                raise ProviderUnavailable(f"instances.delete {zone}/{name}: {e}") from e

        await self._call(delete)

    def close(self) -> None:
        for client in (self._instances, self._operations, self._machine_types):
            transport = getattr(client, "transport", None)
            if transport is not None:
                transport.close()
