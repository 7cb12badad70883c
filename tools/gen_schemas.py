#!/usr/bin/env python3
"""Write kcompat/wire/messages/*.py, the schema declarations, from Kafka's JSON message specs.

    python tools/gen_schemas.py [--specs ../shared/kafka-protocol-4.3] [--check]

The specs are reference data beside the project and never enter the repository; what this
writes is kcompat's own declaration of the protocol's facts (field names, types, version
ranges, tags, defaults), without the specs' prose. --check exits 1 if the checked-in
declarations differ from what the specs would generate.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "kcompat" / "wire" / "messages"
DEFAULT_SPECS = ROOT.parent / "shared" / "kafka-protocol-4.3"  # as Kafka 4.3.1's jars ship them

# Standalone (non-API) messages, grouped into one module each.
DATA_MODULES = {
    "headers": ("client-messages", ["RequestHeader", "ResponseHeader"]),
    "consumer_protocol": ("client-messages", ["ConsumerProtocolSubscription", "ConsumerProtocolAssignment"]),
    # The principal a forwarding broker puts in an Envelope (DefaultKafkaPrincipalBuilder's format).
    "principal": ("client-messages", ["DefaultPrincipalData"]),
    "group_records": (
        "group-coordinator-records",
        [
            "OffsetCommitKey",
            "OffsetCommitValue",
            "GroupMetadataKey",
            "GroupMetadataValue",
            "ConsumerGroupMetadataKey",
            "ConsumerGroupMetadataValue",
            "ConsumerGroupPartitionMetadataKey",
            "ConsumerGroupPartitionMetadataValue",
            "ConsumerGroupMemberMetadataKey",
            "ConsumerGroupMemberMetadataValue",
            "ConsumerGroupTargetAssignmentMetadataKey",
            "ConsumerGroupTargetAssignmentMetadataValue",
            "ConsumerGroupTargetAssignmentMemberKey",
            "ConsumerGroupTargetAssignmentMemberValue",
            "ConsumerGroupCurrentMemberAssignmentKey",
            "ConsumerGroupCurrentMemberAssignmentValue",
            "StreamsGroupMetadataKey",
            "StreamsGroupMetadataValue",
            "StreamsGroupTopologyKey",
            "StreamsGroupTopologyValue",
            "StreamsGroupMemberMetadataKey",
            "StreamsGroupMemberMetadataValue",
            "StreamsGroupTargetAssignmentMetadataKey",
            "StreamsGroupTargetAssignmentMetadataValue",
            "StreamsGroupTargetAssignmentMemberKey",
            "StreamsGroupTargetAssignmentMemberValue",
            "StreamsGroupCurrentMemberAssignmentKey",
            "StreamsGroupCurrentMemberAssignmentValue",
        ],
    ),
    # A share group's own records in __consumer_offsets (KIP-932).
    "share_group_records": (
        "group-coordinator-records",
        [
            "ShareGroupMemberMetadataKey",
            "ShareGroupMemberMetadataValue",
            "ShareGroupMetadataKey",
            "ShareGroupMetadataValue",
            "ShareGroupTargetAssignmentMetadataKey",
            "ShareGroupTargetAssignmentMetadataValue",
            "ShareGroupTargetAssignmentMemberKey",
            "ShareGroupTargetAssignmentMemberValue",
            "ShareGroupCurrentMemberAssignmentKey",
            "ShareGroupCurrentMemberAssignmentValue",
            "ShareGroupStatePartitionMetadataKey",
            "ShareGroupStatePartitionMetadataValue",
        ],
    ),
    "txn_records": ("transaction-coordinator-records", ["TransactionLogKey", "TransactionLogValue"]),
    "share_records": (
        "share-coordinator-records",
        ["ShareSnapshotKey", "ShareSnapshotValue", "ShareUpdateKey", "ShareUpdateValue"],
    ),
    # The __cluster_metadata records a KRaft broker applies, every one the specs define.
    "metadata_records": ("metadata-records", ["*"]),
    # KRaft's own records: the quorum-state file, and the control records and snapshot
    # header/footer that KRaft writes into the metadata log.
    "raft_records": ("raft-records", ["QuorumStateData"]),
    "raft_control_records": (
        "client-messages",
        [
            "LeaderChangeMessage",
            "SnapshotHeaderRecord",
            "SnapshotFooterRecord",
            "KRaftVersionRecord",
            "VotersRecord",
        ],
    ),
}


def load_spec(path: Path) -> dict[str, Any]:
    """Kafka's specs are JSON with // comments."""
    lines = []
    for line in path.read_text().splitlines():
        stripped = line.lstrip()
        if stripped.startswith("//"):
            continue
        lines.append(line)
    data: dict[str, Any] = json.loads("\n".join(lines))
    return data


def snake(name: str) -> str:
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    return s.lower()


def parse_default(raw: Any, type_: str) -> Any:
    """A spec default as the Python value the declaration holds."""
    if isinstance(raw, bool | int | float):
        return raw
    if raw is None or raw == "null":  # some 4.x record specs write a bare JSON null
        return None
    if type_ == "bool":
        return raw == "true"
    if type_ in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
        return int(raw, 0)
    if type_ == "float64":
        return float(raw)
    return raw


def resolve_fields(
    fields: list[dict[str, Any]], common: dict[str, list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """Inline commonStructs, so every struct field carries its own fields."""
    out = []
    for f in fields:
        f = dict(f)
        base = f["type"].removeprefix("[]")
        if "fields" in f:
            f["fields"] = resolve_fields(f["fields"], common)
        elif base in common:
            f["fields"] = resolve_fields(common[base], common)
        out.append(f)
    return out


def field_versions(f: dict[str, Any]) -> str:
    """Kafka's rule: a tagged field that names no versions is present in its tagged versions."""
    versions: str = f.get("versions") or f.get("taggedVersions") or "0+"
    return versions


def lit(v: Any) -> str:
    """A Python literal in the house style (double-quoted strings)."""
    return json.dumps(v) if isinstance(v, str) else repr(v)


def render_field(f: dict[str, Any], indent: int) -> str:
    pad = " " * indent
    args = [lit(snake(f["name"])), lit(f["type"])]
    versions = field_versions(f)
    if versions != "0+":
        args.append(lit(versions))
    if f.get("nullableVersions"):
        args.append(f"nullable={lit(f['nullableVersions'])}")
    base = f["type"].removeprefix("[]")
    if "default" in f:
        args.append(f"default={lit(parse_default(f['default'], base))}")
    if "tag" in f:
        args.append(f"tag={lit(f['tag'])}")
        args.append(f"tagged={lit(f['taggedVersions'])}")
    if "flexibleVersions" in f:
        args.append(f"flexible={lit(f['flexibleVersions'])}")
    if f.get("fields"):
        inner = "".join(render_field(sub, indent + 4) for sub in f["fields"])
        args.append(f"fields=(\n{inner}{pad})")
    return f"{pad}F({', '.join(args)}),\n"


def render_fields(fields: list[dict[str, Any]], indent: int) -> str:
    return "".join(render_field(f, indent) for f in fields)


HEADER = '''"""{title}

Generated by tools/gen_schemas.py from Kafka's message specs (field names in snake_case);
regenerate rather than edit by hand.
"""

from kcompat.wire.schema import F, {imports}

'''


def render_api(req: dict[str, Any], resp: dict[str, Any]) -> tuple[str, str]:
    name = req["name"][: -len("Request")]
    const = snake(name).upper()
    for key in ("validVersions", "flexibleVersions"):
        if req[key] != resp[key]:
            raise SystemExit(f"{name}: request and response differ in {key}")
    common_req = {c["name"]: c["fields"] for c in req.get("commonStructs", [])}
    common_resp = {c["name"]: c["fields"] for c in resp.get("commonStructs", [])}
    title = f"{name} (API key {req['apiKey']}): versions {req['validVersions']}, flexible {req['flexibleVersions']}."
    extra = ""
    if req.get("deprecatedVersions"):
        extra = f"    deprecated={lit(req['deprecatedVersions'])},\n"
    body = (
        f"{const} = api(\n"
        f"    {req['apiKey']},\n"
        f"    {lit(name)},\n"
        f"    {lit(req['validVersions'])},\n"
        f"    flexible={lit(req['flexibleVersions'])},\n"
        f"{extra}"
        f"    request=(\n{render_fields(resolve_fields(req['fields'], common_req), 8)}    ),\n"
        f"    response=(\n{render_fields(resolve_fields(resp['fields'], common_resp), 8)}    ),\n"
        f")\n"
    )
    return snake(name), HEADER.format(title=title, imports="api") + body


def render_data(module: str, specs: list[dict[str, Any]]) -> str:
    parts = []
    for spec in specs:
        common = {c["name"]: c["fields"] for c in spec.get("commonStructs", [])}
        const = snake(spec["name"]).upper()
        parts.append(
            f"{const} = message(\n"
            f"    {lit(spec['name'])},\n"
            f"    {lit(spec['validVersions'])},\n"
            f"    flexible={lit(spec['flexibleVersions'])},\n"
            f"    fields=(\n{render_fields(resolve_fields(spec['fields'], common), 8)}    ),\n"
            f")\n"
        )
    title = f"Standalone message declarations: {', '.join(s['name'] for s in specs)}."
    return HEADER.format(title=title, imports="message") + "\n\n".join(parts)


def generate(specs_dir: Path) -> dict[str, str]:
    """File name -> source, for every module this tool writes."""
    client = specs_dir / "client-messages"
    files: dict[str, str] = {}
    apis: list[tuple[int, str, str]] = []
    for req_path in sorted(client.glob("*Request.json")):
        req = load_spec(req_path)
        if not req.get("listeners"):
            continue  # the ZooKeeper-era inter-broker APIs (LeaderAndIsr, ...): no versions left
        resp = load_spec(req_path.with_name(req_path.name.replace("Request.json", "Response.json")))
        module, source = render_api(req, resp)
        files[module + ".py"] = source
        apis.append((req["apiKey"], module, snake(req["name"][: -len("Request")]).upper()))
    for module, (folder, names) in DATA_MODULES.items():
        paths = (
            sorted((specs_dir / folder).glob("*.json"))
            if names == ["*"]
            else [specs_dir / folder / f"{n}.json" for n in names]
        )
        specs = [load_spec(p) for p in paths]
        files[module + ".py"] = render_data(module, specs)
    apis.sort()
    index = (
        '"""Every API kcompat declares, by API key. Generated by tools/gen_schemas.py.\n\n'
        + "APIS imports an API's declaration module when the API is first looked up (kcompat.wire.api_table).\n"
        + '"""\n\n'
        + "from kcompat.wire.api_table import ApiTable\n\n"
        + "# API key -> (declaration module, its Api constant)\n"
        + "_DECLARED: dict[int, tuple[str, str]] = {\n"
        + "".join(f'    {k}: ("{m}", "{c}"),\n' for k, m, c in apis)
        + "}\n\n"
        + 'APIS = ApiTable(__name__, _DECLARED)\n\n__all__ = ["APIS"]\n'
    )
    files["__init__.py"] = index
    return files


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--specs", type=Path, default=DEFAULT_SPECS)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    files = generate(args.specs)
    if args.check:
        stale = [n for n, src in files.items() if not (OUT / n).exists() or (OUT / n).read_text() != src]
        for n in stale:
            print(f"stale: kcompat/wire/messages/{n}")
        return 1 if stale else 0
    OUT.mkdir(parents=True, exist_ok=True)
    for n, src in files.items():
        (OUT / n).write_text(src)
    print(f"wrote {len(files)} modules to {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
