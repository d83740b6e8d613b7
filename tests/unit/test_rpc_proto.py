"""The proto is the spec: it compiles with protoc alone, every element is documented, and the
committed generated code is what it produces."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from importlib import resources
from pathlib import Path
from types import ModuleType

import pytest
from google.protobuf import descriptor_pb2

ROOT = Path(__file__).resolve().parents[2]
PROTO = "rungar/provider/v1/provider.proto"

# FileDescriptorProto / DescriptorProto / ServiceDescriptorProto / EnumDescriptorProto fields.
MESSAGE, FIELD, NESTED, ENUM, VALUE, SERVICE, METHOD = 4, 2, 3, 5, 2, 6, 2
ENUM_IN_MESSAGE = 4


def _gen_proto() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_proto", ROOT / "tools" / "gen_proto.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def descriptor(tmp_path_factory: pytest.TempPathFactory) -> descriptor_pb2.FileDescriptorProto:
    from grpc_tools import protoc

    out = tmp_path_factory.mktemp("desc") / "provider.desc"
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
    assert code == 0, "protoc (no language plugin) failed to compile the proto"
    files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    return files.file[0]


def test_the_proto_defines_the_seven_calls(descriptor: descriptor_pb2.FileDescriptorProto) -> None:
    assert descriptor.package == "rungar.provider.v1"
    [service] = descriptor.service
    assert [m.name for m in service.method] == [
        "Info",
        "ValidateRunner",
        "Create",
        "Delete",
        "List",
        "UpdateRunner",
        "LastOutput",
    ]


def test_every_message_field_enum_value_and_call_is_documented(
    descriptor: descriptor_pb2.FileDescriptorProto,
) -> None:
    comments = {
        tuple(loc.path): loc.leading_comments.strip()
        for loc in descriptor.source_code_info.location
    }
    undocumented: list[str] = []

    def need(path: tuple[int, ...], what: str) -> None:
        if not comments.get(path):
            undocumented.append(what)

    def walk(message: descriptor_pb2.DescriptorProto, path: tuple[int, ...], name: str) -> None:
        if message.options.map_entry:
            return
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
    assert undocumented == []


def test_the_committed_generated_code_is_up_to_date() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_proto.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_the_check_reports_changed_missing_and_stale_files() -> None:
    gen = _gen_proto()
    committed = {"a_pb2.py": "x\ny\n", "old_pb2.py": "z\n"}
    fresh = {"a_pb2.py": "x\nY\n", "new_pb2.py": "n\n"}
    assert gen.differences(committed, fresh) == [
        "differs: rungar/rpc/_gen/a_pb2.py (2 lines)",
        "missing: rungar/rpc/_gen/new_pb2.py (would be generated)",
        "stale: rungar/rpc/_gen/old_pb2.py (no proto generates it)",
    ]


def test_generated_imports_of_other_protos_become_package_relative(tmp_path: Path) -> None:
    gen = _gen_proto()
    protos = tmp_path / "proto"
    (protos / "rungar" / "admin" / "v1").mkdir(parents=True)
    (protos / "rungar" / "provider" / "v1").mkdir(parents=True)
    (protos / "rungar" / "provider" / "v1" / "provider.proto").write_text(
        (ROOT / "proto" / PROTO).read_text()
    )
    (protos / "rungar" / "admin" / "v1" / "admin.proto").write_text(
        'syntax = "proto3";\npackage rungar.admin.v1;\n'
        'import "rungar/provider/v1/provider.proto";\n'
        "message Providers { repeated rungar.provider.v1.InfoResponse infos = 1; }\n"
        "service Admin { rpc Get(Providers) returns (Providers); }\n"
    )
    out = tmp_path / "_gen"
    gen.generate(protos, out)
    admin_grpc = (out / "rungar" / "admin" / "v1" / "admin_pb2_grpc.py").read_text()
    admin_pb2 = (out / "rungar" / "admin" / "v1" / "admin_pb2.py").read_text()
    assert "from . import admin_pb2 as" in admin_grpc
    assert "from ...provider.v1 import provider_pb2 as" in admin_pb2
    assert "from rungar." not in admin_pb2 + admin_grpc
    assert admin_pb2.startswith("# Generated by tools/gen_proto.py from proto/rungar/admin")
    assert (out / "rungar" / "admin" / "__init__.py").exists()
