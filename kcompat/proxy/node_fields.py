"""Which answers name a node, and where: the table the proxy's rewriter is driven by.

Every response struct of the 4.3.1 specs that carries a Host and a Port is listed, either in
NODE_FIELDS (a Kafka node: rewritten to the proxy's endpoint for that node id) or in NOT_NODES
(an address that is not a Kafka node's, with why). tests/proxy/test_node_fields.py walks the
specs and fails on a struct in neither, so a new field in a new version cannot slip through.

LEADER_HINTS lists the node-id-only leader structs (KIP-951 CurrentLeader): node ids pass
unchanged (the proxy keeps the upstream's ids), but the answers that carry them also carry the
NodeEndpoints that must be rewritten, so those versions are decoded.

Paths are snake_case field names from the response root ('' root: the top-level fields).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

from kcompat.wire.messages import APIS
from kcompat.wire.schema import F


@dataclass(frozen=True)
class NodeFields:
    """A struct naming a node: `node_id` is its own field, or its parent's with `id_in_parent`.
    `learn`: its address is a broker's (feeds the proxy's node map); controllers' are not learnt."""

    api_key: int
    path: tuple[str, ...]
    node_id: str
    learn: bool = True
    id_in_parent: bool = False


PRODUCE, FETCH, METADATA, FIND_COORDINATOR = 0, 1, 3, 10
DESCRIBE_QUORUM, DESCRIBE_CLUSTER, SHARE_FETCH, SHARE_ACKNOWLEDGE = 55, 60, 78, 79

NODE_FIELDS: tuple[NodeFields, ...] = (
    NodeFields(PRODUCE, ("node_endpoints",), "node_id"),  # KIP-951, v10+
    NodeFields(FETCH, ("node_endpoints",), "node_id"),  # KIP-951, v16+
    NodeFields(METADATA, ("brokers",), "node_id"),
    NodeFields(FIND_COORDINATOR, (), "node_id"),  # v0-3: one coordinator at the top level
    NodeFields(FIND_COORDINATOR, ("coordinators",), "node_id"),  # v4+: a list (KIP-699)
    NodeFields(DESCRIBE_CLUSTER, ("brokers",), "broker_id"),  # controllers too with EndpointType 2
    NodeFields(SHARE_FETCH, ("node_endpoints",), "node_id"),
    NodeFields(SHARE_ACKNOWLEDGE, ("node_endpoints",), "node_id"),
    # KIP-919 and the KRaft RPCs: controller listeners, rewritten, never learnt as brokers' (a
    # combined node has the same id on both listeners).
    NodeFields(DESCRIBE_QUORUM, ("nodes", "listeners"), "node_id", learn=False, id_in_parent=True),
    NodeFields(52, ("node_endpoints",), "node_id", learn=False),  # Vote
    NodeFields(53, ("node_endpoints",), "node_id", learn=False),  # BeginQuorumEpoch
    NodeFields(54, ("node_endpoints",), "node_id", learn=False),  # EndQuorumEpoch
    NodeFields(59, ("node_endpoints",), "node_id", learn=False),  # FetchSnapshot
    NodeFields(82, ("current_leader",), "leader_id", learn=False),  # UpdateRaftVoter
)

NOT_NODES: dict[tuple[int, tuple[str, ...]], str] = {
    (88, ("partitions_by_user_endpoint", "user_endpoint")): "a Streams instance's application.server",
    (89, ("groups", "members", "user_endpoint")): "a Streams instance's application.server",
}

LEADER_HINTS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (PRODUCE, ("responses", "partition_responses", "current_leader")),
    (FETCH, ("responses", "partitions", "current_leader")),
    (SHARE_FETCH, ("responses", "partitions", "current_leader")),
    (SHARE_ACKNOWLEDGE, ("responses", "partitions", "current_leader")),
    (59, ("topics", "partitions", "current_leader")),  # FetchSnapshot
    (52, ("topics", "partitions")),  # Vote, BeginQuorumEpoch, EndQuorumEpoch: leader id per partition
    (53, ("topics", "partitions")),
    (54, ("topics", "partitions")),
)


def _field(fields: tuple[F, ...], name: str) -> F:
    for f in fields:
        if f.name == name:
            return f
    raise KeyError(name)


def path_versions(api_key: int, path: tuple[str, ...]) -> frozenset[int]:
    """The response versions in which every field along `path` exists."""
    spec = APIS[api_key]
    top = spec.versions.high if spec.versions.high is not None else spec.versions.low
    found = set(range(spec.versions.low, top + 1))
    fields = spec.response.fields
    for name in path:
        f = _field(fields, name)
        found &= {v for v in found if v in f.versions}
        fields = f.fields
    if not path:  # the top-level host exists only where FindCoordinator v0-3 has it
        found &= {v for v in found if v in _field(fields, "host").versions}
    return frozenset(found)


@cache
def decoded_versions() -> dict[int, frozenset[int]]:
    """API key -> the response versions the proxy must decode (they name a node somewhere)."""
    out: dict[int, set[int]] = {}
    for entry in NODE_FIELDS:
        out.setdefault(entry.api_key, set()).update(path_versions(entry.api_key, entry.path))
    return {k: frozenset(v) for k, v in out.items()}


def fields_of(api_key: int) -> Iterator[NodeFields]:
    return (e for e in NODE_FIELDS if e.api_key == api_key)


def must_decode(api_key: int, api_version: int) -> bool:
    versions = decoded_versions().get(api_key)
    return versions is not None and api_version in versions
