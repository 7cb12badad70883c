"""meta.properties of a log dir, as Kafka's `kafka-storage format` writes it (version=1, cluster.id,
node.id, directory.id): read, checked against this broker's cluster and node, written."""

from __future__ import annotations

from pathlib import Path

from kcompat.log.errors import InconsistentClusterId
from kcompat.log.log_files import atomic_write

META_PROPERTIES = "meta.properties"
META_VERSION = 1


def read_properties(path: Path) -> dict[str, str]:
    props = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, _, value = line.partition("=")
        props[key.strip()] = value.strip()
    return props


def write_properties(path: Path, props: dict[str, str]) -> None:
    body = "#\n#Written by kcompat\n" + "".join(f"{k}={v}\n" for k, v in sorted(props.items()))
    atomic_write(path, body.encode())


def check_meta_properties(d: Path, cluster_id: str, node_id: int) -> dict[str, str] | None:
    """The meta.properties of log dir `d` (None when absent), read only; InconsistentClusterId when it
    names another cluster or node. Kafka's `kafka-storage format` writes the same file, so a dir
    it formatted (version=1, cluster.id, node.id, directory.id) is taken as it is."""
    path = d / META_PROPERTIES
    if not path.exists():
        return None
    props = read_properties(path)
    if props.get("cluster.id") not in (None, cluster_id):
        raise InconsistentClusterId(f"{path} belongs to cluster {props.get('cluster.id')}, not {cluster_id}")
    if props.get("node.id") not in (None, str(node_id)):
        raise InconsistentClusterId(f"{path} belongs to node {props.get('node.id')}, not {node_id}")
    return props
