"""AlterReplicaLogDirs and DescribeLogDirs on a plain socket, for the JBOD compat tests (the Python
clients have no call for them)."""

from __future__ import annotations

import socket
from typing import Any

from kcompat.testing import recv_exact
from kcompat.wire.messages.alter_replica_log_dirs import ALTER_REPLICA_LOG_DIRS
from kcompat.wire.messages.describe_log_dirs import DESCRIBE_LOG_DIRS
from kcompat.wire.protocol import decode_response, encode_request
from kcompat.wire.schema import Api


def call(bootstrap: str, api: Api, version: int, body: Any) -> Any:
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(encode_request(api.key, version, 1, body, client_id="jbod-test"))
        size = int.from_bytes(recv_exact(sock, 4), "big")
        _, resp = decode_response(api.key, version, recv_exact(sock, size))
    return resp


def alter(bootstrap: str, path: str, topic: str, *partitions: int) -> dict[int, int]:
    body = {"dirs": [{"path": path, "topics": [{"name": topic, "partitions": list(partitions)}]}]}
    (t,) = call(bootstrap, ALTER_REPLICA_LOG_DIRS, 2, body).results
    return {p.partition_index: p.error_code for p in t.partitions}


def placement(bootstrap: str, topic: str) -> dict[tuple[int, bool], str]:
    """(partition, is_future) -> log dir, and each offline dir under (-1, False) ... as error codes."""
    out: dict[tuple[int, bool], str] = {}
    for r in call(bootstrap, DESCRIBE_LOG_DIRS, 4, {"topics": None}).results:
        for t in r.topics:
            if t.name == topic:
                for p in t.partitions:
                    out[(p.partition_index, p.is_future_key)] = r.log_dir
    return out


def dir_errors(bootstrap: str) -> dict[str, int]:
    return {r.log_dir: r.error_code for r in call(bootstrap, DESCRIBE_LOG_DIRS, 4, {"topics": None}).results}
