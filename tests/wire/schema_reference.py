"""Read Kafka's JSON message specs (outside the repository) into a form comparable with ours.

Two references exist on a developer's or CI machine: the official specs in
../shared/kafka-protocol-4.3 (as Kafka 4.3.1's jars ship them) and the specs kafka-python ships
as package data.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from kcompat.wire.messages import (
    APIS,
    consumer_protocol,
    group_records,
    headers,
    metadata_records,
    raft_control_records,
    raft_records,
    txn_records,
)
from kcompat.wire.schema import F, Message, VersionRange
from tools.gen_schemas import field_versions, load_spec, parse_default, resolve_fields, snake

ROOT = Path(__file__).resolve().parents[2]
SHARED_SPECS = ROOT.parent / "shared" / "kafka-protocol-4.3"

# Every message kcompat declares: each API's request and response, headers, records.
MESSAGES: list[Message] = [m for a in APIS.values() for m in (a.request, a.response)]
for module in (
    headers,
    consumer_protocol,
    group_records,
    txn_records,
    metadata_records,
    raft_records,
    raft_control_records,
):
    MESSAGES += [v for v in vars(module).values() if isinstance(v, Message)]


def kafka_python_specs() -> Path | None:
    found = importlib.util.find_spec("kafka")
    if found is None or found.origin is None:
        return None
    path = Path(found.origin).parent / "protocol" / "schemas" / "resources"
    return path if path.is_dir() else None


Shape = list[tuple[Any, ...]]


def shape_of_ours(fields: tuple[F, ...], version: int) -> Shape:
    out: Shape = []
    for f in fields:
        if version not in f.versions:
            continue
        out.append(
            (
                f.name,
                f.type,
                version in f.nullable,
                f.tag if version in f.tagged else None,
                None if f.flexible is None else version in f.flexible,
                shape_of_ours(f.fields, version) if f.fields else None,
            )
        )
    return out


def shape_of_spec(fields: list[dict[str, Any]], version: int) -> Shape:
    out: Shape = []
    for f in fields:
        if version not in VersionRange.parse(field_versions(f)):
            continue
        tagged = VersionRange.parse(f.get("taggedVersions"))
        flex = f.get("flexibleVersions")
        out.append(
            (
                snake(f["name"]),
                f["type"],
                version in VersionRange.parse(f.get("nullableVersions")),
                f["tag"] if "tag" in f and version in tagged else None,
                None if flex is None else version in VersionRange.parse(flex),
                shape_of_spec(f["fields"], version) if f.get("fields") else None,
            )
        )
    return out


def defaults_of_spec(fields: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields:
        base = f["type"].removeprefix("[]")
        if "default" in f:
            out[snake(f["name"])] = parse_default(f["default"], base)
        if f.get("fields"):
            for k, v in defaults_of_spec(f["fields"]).items():
                out[f"{snake(f['name'])}.{k}"] = v
    return out


def defaults_of_ours(fields: tuple[F, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields:
        out[f.name] = f.default
        for k, v in defaults_of_ours(f.fields).items():
            out[f"{f.name}.{k}"] = v
    return out


def load_resolved(path: Path) -> dict[str, Any]:
    spec = load_spec(path)
    common = {c["name"]: c["fields"] for c in spec.get("commonStructs", [])}
    spec["fields"] = resolve_fields(spec["fields"], common)
    return spec


def find_spec(specs_dir: Path, message: Message) -> Path | None:
    for candidate in specs_dir.rglob(f"{message.name}.json"):
        return candidate
    # A few files are not named after their message (ZkMigrationRecord.json: ZkMigrationStateRecord)
    for candidate in specs_dir.rglob("*Record.json"):
        if load_spec(candidate).get("name") == message.name:
            return candidate
    return None


def versions(r: VersionRange) -> range:
    assert r.high is not None
    return range(r.low, r.high + 1)


def compare(message: Message, spec_path: Path, versions: range) -> int:
    spec = load_resolved(spec_path)
    compared = 0
    for v in versions:
        assert shape_of_ours(message.fields, v) == shape_of_spec(spec["fields"], v), f"{message.name} v{v}"
        compared += 1
    return compared
