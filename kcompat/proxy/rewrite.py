"""Rewriting the node addresses in a decoded answer, by the table of node_fields.py.

Node ids pass unchanged (each upstream node id keeps its id behind the proxy); host and port
become the proxy's endpoint for that id. Before an address is replaced it is learnt, when the
struct is a broker's, so that the proxy can route the connections its clients open next.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from kcompat.proxy.node_fields import DESCRIBE_CLUSTER, fields_of

Endpoint = Callable[[int], tuple[str, int]]  # node id -> the proxy's (host, port) for it
Learn = Callable[[int, str, int], None]  # node id, upstream host, upstream port

_CONTROLLER_ENDPOINTS = 2  # DescribeCluster EndpointType (KIP-919)


def _structs(value: Any, path: tuple[str, ...], parent: Any = None) -> Iterator[tuple[Any, Any]]:
    """(struct, its parent) for every struct at `path` below `value` (lists walked, None skipped)."""
    if value is None:
        return
    if isinstance(value, list):
        for item in value:
            yield from _structs(item, path, parent)
        return
    if not path:
        yield value, parent
        return
    yield from _structs(getattr(value, path[0], None), path[1:], value)


def rewrite_nodes(api_key: int, body: Any, endpoint: Endpoint, learn: Learn) -> list[tuple[str, int]]:
    """Rewrite every node address of `body` (an answer of `api_key`) in place; the upstream
    addresses replaced, in order (for logs and tests)."""
    replaced: list[tuple[str, int]] = []
    brokers = not (api_key == DESCRIBE_CLUSTER and getattr(body, "endpoint_type", 1) == _CONTROLLER_ENDPOINTS)
    for entry in fields_of(api_key):
        for struct, parent in _structs(body, entry.path):
            owner = parent if entry.id_in_parent else struct
            node_id = getattr(owner, entry.node_id)
            host, port = struct.host, struct.port
            if node_id < 0 or not host:  # no node (an error answer's -1, "", -1)
                continue
            if entry.learn and brokers:
                learn(node_id, host, port)
            struct.host, struct.port = endpoint(node_id)
            replaced.append((host, port))
    return replaced
