"""boto3 behind :class:`rungar_aws.api.Ec2`: the only module that imports it.

It is imported only by :func:`rungar_aws.provider.open_aws_provider`. Blocking calls run in a
thread. botocore's own retries are off (``total_max_attempts=1``): it would otherwise resend a
capacity refusal (``InsufficientInstanceCapacity`` is an HTTP 500) up to 3–5 times before
Rungar sees it; the provider decides what to retry, with the same
``ClientToken``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import boto3
import botocore.exceptions as bexc
import botocore.session
from botocore.config import Config

from rungar.errors import ProviderError, ProviderUnavailable
from rungar_aws.api import Ec2Instance, RunFailure
from rungar_aws.errors import NO_ANSWER
from rungar_aws.settings import AwsSettings

T = TypeVar("T")
NO_ANSWER_ERRORS = (
    bexc.EndpointConnectionError,
    bexc.ConnectionClosedError,
    bexc.ConnectTimeoutError,
    bexc.ReadTimeoutError,
    bexc.ConnectionError,
)


def _instance(raw: Mapping[str, Any]) -> Ec2Instance:
    tags = {t["Key"]: t["Value"] for t in raw.get("Tags", [])}
    launched = raw.get("LaunchTime")
    return Ec2Instance(
        instance_id=raw["InstanceId"],
        name=tags.get("Name", ""),
        state=raw.get("State", {}).get("Name", ""),
        instance_type=raw.get("InstanceType", ""),
        tags=tags,
        launched_at=launched.timestamp() if launched is not None else 0.0,
    )


class Ec2Api:
    """An EC2 client for one region (``Ec2``)."""

    def __init__(self, settings: AwsSettings) -> None:
        core = botocore.session.Session()
        if settings.credentials_file:
            # Per provider, not AWS_SHARED_CREDENTIALS_FILE, which would be process-wide.
            core.set_config_variable("credentials_file", settings.credentials_file)
        session = boto3.session.Session(
            botocore_session=core,
            region_name=settings.region,
            profile_name=settings.profile or None,
        )
        config = Config(
            retries={"total_max_attempts": 1, "mode": "standard"},
            connect_timeout=min(settings.timeout, 10.0),
            read_timeout=settings.timeout,
        )
        self.client: Any = session.client(
            "ec2", endpoint_url=settings.endpoint_url or None, config=config
        )

    async def _call(self, fn: Callable[[], T]) -> T:
        return await asyncio.to_thread(fn)

    async def run(self, params: Mapping[str, Any]) -> Ec2Instance | RunFailure:
        def run() -> Ec2Instance | RunFailure:
            try:
                answer = self.client.run_instances(**params)
            except bexc.ClientError as e:
                err = e.response.get("Error", {})
                status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
                return RunFailure(str(err.get("Code", "")), status, str(err.get("Message", "")))
            except NO_ANSWER_ERRORS as e:
                return RunFailure(NO_ANSWER, None, type(e).__name__)
            except (bexc.NoCredentialsError, bexc.PartialCredentialsError) as e:
                return RunFailure(type(e).__name__, None, str(e))
            return _instance(answer["Instances"][0])

        return await self._call(run)

    async def find(self, filters: list[dict[str, Any]]) -> list[Ec2Instance]:
        def find() -> list[Ec2Instance]:
            try:
                pages = self.client.get_paginator("describe_instances").paginate(Filters=filters)
                return [
                    _instance(raw)
                    for page in pages
                    for reservation in page.get("Reservations", [])
                    for raw in reservation.get("Instances", [])
                ]
            except NO_ANSWER_ERRORS as e:
                raise ProviderUnavailable(f"DescribeInstances: {e}") from e
            except (bexc.ClientError, bexc.BotoCoreError) as e:
                raise ProviderError(f"DescribeInstances: {e}") from e

        return await self._call(find)

    async def terminate(self, instance_ids: list[str]) -> None:
        def terminate() -> None:
            try:
                self.client.terminate_instances(InstanceIds=instance_ids)
            except NO_ANSWER_ERRORS as e:
                raise ProviderUnavailable(f"TerminateInstances: {e}") from e
            except bexc.ClientError as e:
                if e.response.get("Error", {}).get("Code") == "InvalidInstanceID.NotFound":
                    return
                raise ProviderError(f"TerminateInstances: {e}") from e

        await self._call(terminate)

    async def console_output(self, instance_id: str) -> str:
        def read() -> str:
            try:
                answer = self.client.get_console_output(InstanceId=instance_id, Latest=True)
            except NO_ANSWER_ERRORS as e:
                raise ProviderUnavailable(f"GetConsoleOutput: {e}") from e
            except bexc.ClientError as e:
                if e.response.get("Error", {}).get("Code") == "InvalidInstanceID.NotFound":
                    return ""
                raise ProviderError(f"GetConsoleOutput: {e}") from e
            raw = str(answer.get("Output") or "")
            try:  # EC2 sends it base64-encoded; boto3 usually decodes it already
                return base64.b64decode(raw, validate=True).decode("utf-8", "replace")
            except (binascii.Error, ValueError):
                return raw

        return await self._call(read)

    async def root_device(self, image: str) -> str | None:
        def root() -> str | None:
            try:
                images = self.client.describe_images(ImageIds=[image]).get("Images", [])
            except NO_ANSWER_ERRORS as e:
                raise ProviderUnavailable(f"DescribeImages: {e}") from e
            except bexc.ClientError as e:
                if str(e.response.get("Error", {}).get("Code", "")).startswith("InvalidAMIID"):
                    return None
                raise ProviderError(f"DescribeImages: {e}") from e
            return str(images[0].get("RootDeviceName") or "/dev/xvda") if images else None

        return await self._call(root)

    def close(self) -> None:
        self.client.close()
