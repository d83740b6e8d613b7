"""admin.proto is the admin API's spec: it compiles with protoc alone, it has the calls the CLI
uses, and every message, field, enum value and call in it is documented."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

ROOT = Path(__file__).resolve().parents[2]
PROTO = "rungar/admin/v1/admin.proto"
# FileDescriptorProto / DescriptorProto / ServiceDescriptorProto / EnumDescriptorProto fields.
MESSAGE, FIELD, NESTED, ENUM, VALUE, SERVICE, METHOD = 4, 2, 3, 5, 2, 6, 2
ENUM_IN_MESSAGE = 4


@pytest.fixture(scope="module")
def descriptor(tmp_path_factory: pytest.TempPathFactory) -> descriptor_pb2.FileDescriptorProto:
    from grpc_tools import protoc

    out = tmp_path_factory.mktemp("desc") / "admin.desc"
    code = protoc.main(
        [
            "protoc",
            f"-I{ROOT / 'proto'}",
            f"-I{resources.files('grpc_tools') / '_proto'}",
            "--include_source_info",
            f"--descriptor_set_out={out}",
            PROTO,
        ]
    )
    assert code == 0, "protoc (no language plugin) failed to compile admin.proto"
    return descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[0]


def test_the_admin_service_has_the_calls_the_cli_uses(
    descriptor: descriptor_pb2.FileDescriptorProto,
) -> None:
    assert descriptor.package == "rungar.admin.v1"
    [service] = descriptor.service
    calls = {m.name: m for m in service.method}
    assert list(calls) == [
        "Status",
        "Apply",
        "Events",
        "ScaleSetAction",
        "ProviderAction",
        "RemoveRunners",
        "Reconcile",
        "InspectScaleSet",
        "InspectProvider",
        "Usage",
    ]
    streaming = {name for name, m in calls.items() if m.server_streaming}
    assert streaming == {"Events", "ScaleSetAction", "ProviderAction"}


def test_every_message_field_enum_value_and_call_is_documented(
    descriptor: descriptor_pb2.FileDescriptorProto,
) -> None:
    comments = {
        tuple(loc.path): loc.leading_comments.strip() or loc.trailing_comments.strip()
        for loc in descriptor.source_code_info.location
    }
    undocumented: list[str] = []

    def need(path: tuple[int, ...], what: str) -> None:
        if not comments.get(path):
            undocumented.append(what)

    def walk(message: descriptor_pb2.DescriptorProto, path: tuple[int, ...], name: str) -> None:
        need(path, name)
        for i, field in enumerate(message.field):
            need((*path, FIELD, i), f"{name}.{field.name}")
        for i, enum in enumerate(message.enum_type):
            need((*path, ENUM_IN_MESSAGE, i), f"{name}.{enum.name}")
            for j, value in enumerate(enum.value):
                need((*path, ENUM_IN_MESSAGE, i, VALUE, j), f"{name}.{enum.name}.{value.name}")
        for i, nested in enumerate(message.nested_type):
            walk(nested, (*path, NESTED, i), f"{name}.{nested.name}")

    for i, message in enumerate(descriptor.message_type):
        walk(message, (MESSAGE, i), message.name)
    for i, service in enumerate(descriptor.service):
        need((SERVICE, i), service.name)
        for j, method in enumerate(service.method):
            need((SERVICE, i, METHOD, j), f"{service.name}.{method.name}")
    assert undocumented == [], undocumented
