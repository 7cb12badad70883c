"""Replay a captured produce stream against any cluster, in order per partition.

What it reads (one file; the form is told from its first character):
  * a records capture as `GET /captures/ID` or `kcompat capture show ID --format json` gives it
    (an object with "records"), or one such record per line;
  * a protocol log (kind log) written with "full": true: the records of its Produce requests
    whose answer took them (records of a summarized log are not there: it says so).
Only produced records are replayed (consumed ones are what some client read). Each partition's
records go in the order they were captured, in batches of at most `batch` records, each batch
acknowledged (acks=all) before the next, so the target's order matches the capture's. Key, value,
headers and timestamp are kept; offsets are the target's own. A topic the target lacks is made
with as many partitions as the capture used (and the target's default replication factor).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kcompat.capture.bodies import unblob
from kcompat.wire.records import Record


class ReplayError(ValueError):
    """A file that holds no produce stream replay can read; the message says why."""


Stream = dict[tuple[str, int], list[Record]]


def read_stream(path: Path) -> Stream:
    """(topic, partition) -> its produced records in capture order."""
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    if not stripped:
        raise ReplayError(f"{path} is empty")
    items: list[Any]
    if stripped.startswith("{") and "\n{" not in stripped.rstrip():
        whole = json.loads(stripped)
        items = whole["records"] if isinstance(whole, dict) and "records" in whole else [whole]
    elif stripped.startswith("["):
        items = json.loads(stripped)
    else:
        items = [json.loads(line) for line in text.splitlines() if line.strip()]
    stream: Stream = {}
    for topic, partition, rec in _produced(items, path):
        stream.setdefault((topic, partition), []).append(rec)
    if not stream:
        raise ReplayError(f"{path} holds no produced record")
    return stream


def _produced(items: list[Any], path: Path) -> Iterator[tuple[str, int, Record]]:
    summarized = False
    for item in items:
        if not isinstance(item, dict):
            raise ReplayError(f"{path}: {item!r} is neither a captured record nor a log line")
        if "direction" in item:
            if item["direction"] == "produce" and item.get("topic") is not None:
                yield item["topic"], int(item["partition"]), _record(item)
        elif item.get("api") == "Produce":
            found = list(_logged(item))
            summarized |= not found and _has_batches(item)
            yield from found
    if summarized:
        raise ReplayError(f"{path}: a summarized protocol log (start the capture with full: true)")


def _logged(line: dict[str, Any]) -> Iterator[tuple[str, int, Record]]:
    taken = {
        (t.get("name"), p["index"])
        for t in (line.get("response") or {}).get("responses", [])
        for p in t.get("partition_responses", [])
        if p.get("error_code") == 0
    }
    acks0 = line.get("response") is None
    for t in line["request"].get("topic_data", []):
        for p in t.get("partition_data", []):
            if not acks0 and (t.get("name"), p["index"]) not in taken:
                continue
            for batch in p.get("records") or []:
                if batch.get("control"):
                    continue
                for r in batch.get("records", []) if isinstance(batch.get("records"), list) else []:
                    yield t["name"], int(p["index"]), _record(r)


def _has_batches(line: dict[str, Any]) -> bool:
    return any(
        p.get("records") for t in line["request"].get("topic_data", []) for p in t.get("partition_data", [])
    )


def _record(item: dict[str, Any]) -> Record:
    headers = tuple((str(k), unblob(v)) for k, v in item.get("headers") or [])
    return Record(
        0, int(item.get("timestamp", -1)), unblob(item.get("key")), unblob(item.get("value")), headers
    )


def replay(stream: Stream, bootstrap: str, *, batch: int = 500, timeout: float = 30.0) -> dict[str, int]:
    """Produce the stream to the cluster at `bootstrap`; records sent per topic."""
    from kcompat.client.admin import create_topic
    from kcompat.client.cluster import Cluster
    from kcompat.client.errors import KafkaError
    from kcompat.client.records import produce
    from kcompat.wire.error_codes import ErrorCode

    sent: dict[str, int] = {}
    with Cluster(bootstrap, timeout=timeout) as cluster:
        partitions: dict[str, int] = {}
        for topic, partition in stream:
            partitions[topic] = max(partitions.get(topic, 0), partition + 1)
        for topic, count in partitions.items():
            try:
                cluster.topic(topic)
            except KafkaError as e:
                if e.code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    raise
                create_topic(cluster, topic, count)
        for (topic, partition), records in stream.items():
            info = cluster.topic(topic)
            for start in range(0, len(records), batch):
                chunk = records[start : start + batch]
                deltas = [Record(i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(chunk)]
                produce(cluster, info, {partition: deltas})
            sent[topic] = sent.get(topic, 0) + len(records)
    return sent
