"""The table of node-naming fields (kcompat/proxy/node_fields.py) against the schemas and the specs.

Every response struct carrying a Host and a Port (a node's address, or some other address) must
be in the table or in NOT_NODES; every KIP-951 leader struct (LeaderId + LeaderEpoch in an answer
that also has NodeEndpoints) in LEADER_HINTS. The generated schemas are walked always; Kafka's
official 4.3.1 specs too when they sit beside the repository (../shared/kafka-protocol-4.3).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kcompat.proxy.node_fields import LEADER_HINTS, NODE_FIELDS, NOT_NODES, decoded_versions, path_versions
from kcompat.wire.messages import APIS
from kcompat.wire.schema import F
from tests.wire.schema_reference import SHARED_SPECS
from tools.gen_schemas import load_spec, resolve_fields, snake

Found = tuple[int, tuple[str, ...]]
TABLE = {(e.api_key, e.path) for e in NODE_FIELDS}


def _schema_structs(
    fields: tuple[F, ...], path: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], set[str]]]:
    yield path, {f.name for f in fields if not f.fields}
    for f in fields:
        if f.fields:
            yield from _schema_structs(f.fields, (*path, f.name))


def _spec_structs(
    fields: list[dict[str, Any]], path: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], set[str]]]:
    yield path, {snake(f["name"]) for f in fields if "fields" not in f}
    for f in fields:
        if "fields" in f:
            yield from _spec_structs(f["fields"], (*path, snake(f["name"])))


def _classify(key: int, structs: list[tuple[tuple[str, ...], set[str]]]) -> tuple[set[Found], set[Found]]:
    addresses = {(key, p) for p, names in structs if {"host", "port"} <= names}
    has_endpoints = any(p == ("node_endpoints",) for p, _ in structs)
    leaders = {(key, p) for p, names in structs if has_endpoints and {"leader_id", "leader_epoch"} <= names}
    return addresses, leaders


def _check(addresses: set[Found], leaders: set[Found]) -> None:
    missing = {a for a in addresses if a not in TABLE and a not in NOT_NODES}
    assert not missing, f"structs naming a host and port the proxy would not rewrite: {sorted(missing)}"
    unlisted = leaders - set(LEADER_HINTS) - TABLE
    assert not unlisted, f"leader structs not in LEADER_HINTS: {sorted(unlisted)}"


def test_every_address_struct_of_the_schemas_is_in_the_table() -> None:
    addresses: set[Found] = set()
    leaders: set[Found] = set()
    for key, api in APIS.items():
        a, l_ = _classify(key, list(_schema_structs(api.response.fields, ())))
        addresses |= a
        leaders |= l_
    _check(addresses, leaders)
    # the fields the issue names are among them
    for key, path in [(0, ("node_endpoints",)), (1, ("node_endpoints",)), (3, ("brokers",)), (10, ()),
                      (10, ("coordinators",)), (60, ("brokers",)), (78, ("node_endpoints",)),
                      (79, ("node_endpoints",)), (55, ("nodes", "listeners"))]:  # fmt: skip
        assert (key, path) in TABLE
    assert (0, ("responses", "partition_responses", "current_leader")) in LEADER_HINTS
    assert (1, ("responses", "partitions", "current_leader")) in LEADER_HINTS


@pytest.mark.skipif(not SHARED_SPECS.is_dir(), reason=f"Kafka's specs are not at {SHARED_SPECS}")
def test_every_address_struct_of_the_official_specs_is_in_the_table() -> None:
    addresses: set[Found] = set()
    leaders: set[Found] = set()
    seen = 0
    for path in sorted((SHARED_SPECS / "client-messages").glob("*Response.json")):
        spec = load_spec(path)
        common = {c["name"]: c["fields"] for c in spec.get("commonStructs", [])}
        spec["fields"] = resolve_fields(spec.get("fields", []), common)
        key = spec["apiKey"]
        # an API without a schema here (ControlledShutdown) is left out of ApiVersions: no client
        # sends it through the proxy, and its answers are checked anyway
        a, l_ = _classify(key, list(_spec_structs(spec["fields"], ())))
        addresses |= a
        leaders |= l_
        seen += 1
    assert seen > 80
    assert len(addresses) >= 15, addresses
    _check(addresses, leaders)


def test_table_entries_exist_in_the_schemas() -> None:
    for e in NODE_FIELDS:
        assert path_versions(e.api_key, e.path), e
    for key, path in LEADER_HINTS:
        assert path_versions(key, path), (key, path)


def test_decoded_versions_follow_the_schemas() -> None:
    versions = decoded_versions()
    assert min(versions[0]) == 10 and 9 not in versions[0]  # Produce: NodeEndpoints from v10
    assert min(versions[1]) == 16 and 15 not in versions[1]  # Fetch: from v16
    assert versions[3] == frozenset(range(14))  # Metadata: every version
    assert versions[10] == frozenset(range(7))  # FindCoordinator: v0-3 single, v4-6 list
    assert 2 in versions[55] and 1 not in versions[55]  # DescribeQuorum listeners from v2
    assert 2 not in versions  # ListOffsets names no node: relayed as bytes
