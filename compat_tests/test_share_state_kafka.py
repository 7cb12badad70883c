"""The share coordinator's inter-broker APIs answer as Apache Kafka 4.3.1's do: one sequence of
Initialize/Read/Write/Delete/ReadSummary ShareGroupState and FindCoordinator (key type 2) sent
to a Kafka 4.3.1 broker (combined mode, formatted with its defaults: share.version=1) and to
`kcompat serve`; every answer's error code and state must be the same. This is what a Kafka 4.3.1
share-partition leader relies on when a kcompat broker is its share coordinator."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.brokers import KafkaBroker
from kcompat.client.cluster import Cluster
from kcompat.client.connection import Connection
from kcompat.client.records import fetch
from kcompat.coordinator.share_coordinator import ShareKey, state_partition
from kcompat.coordinator.share_coordinator.records import ShareSnapshot, decode
from kcompat.kafka_uuid import to_base64
from kcompat.storage.topic_store import SHARE_GROUP_STATE
from kcompat.testing import Broker
from kcompat.wire.error_codes import ErrorCode as E

FIND_COORDINATOR, CREATE_TOPICS, METADATA = 10, 19, 3
INITIALIZE, READ, WRITE, DELETE, SUMMARY = 83, 84, 85, 86, 87
RETRY = {E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE}
pytestmark = pytest.mark.timeout(240)


PER_SNAPSHOT = {"share.coordinator.snapshot.update.records.per.snapshot": "2"}  # cadence, not 500


class _Kafka(KafkaBroker):
    def properties(self) -> dict[str, str]:
        return {**super().properties(), **PER_SNAPSHOT}


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    why = KafkaBroker.available()
    if why is not None:
        pytest.fail(why, pytrace=False)
    broker = _Kafka(tmp_path_factory.mktemp("kafka-share-state"))
    broker.start()
    try:
        yield broker.host, broker.port
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def kcompat(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    base: Path = tmp_path_factory.mktemp("kcompat-share-state")
    broker = Broker(base / "data", base / "kcompat.log", overrides=PER_SNAPSHOT)
    broker.start()
    try:
        host, port = broker.bootstrap.rsplit(":", 1)
        yield host, int(port)
    finally:
        broker.stop()


def _ask(conn: Connection, api: int, version: int, body: dict[str, Any]) -> Any:
    """One partition's answer, asked again while the coordinator is still being set up."""
    deadline = time.monotonic() + 60
    while True:
        _, answer = conn.request(api, body, version=version)
        if not answer.results:
            return None  # Kafka answers a request without a group id with no results
        p = answer.results[0].partitions[0]
        if p.error_code not in RETRY or time.monotonic() > deadline:
            return p
        time.sleep(0.2)


def _body(group: str, topic_id: uuid.UUID, partition: int = 0, **fields: Any) -> dict[str, Any]:
    return {
        "group_id": group,
        "topics": [{"topic_id": topic_id, "partitions": [{"partition": partition, **fields}]}],
    }


def _batches(*spec: tuple[int, int, int, int]) -> list[dict[str, int]]:
    return [
        {"first_offset": f, "last_offset": la, "delivery_state": s, "delivery_count": c}
        for f, la, s, c in spec
    ]


def _sequence(address: tuple[str, int]) -> tuple[list[tuple[str, Any]], uuid.UUID]:
    conn = Connection(*address, timeout=30)
    try:
        _, created = conn.request(CREATE_TOPICS, {
            "topics": [{"name": "st", "num_partitions": 3, "replication_factor": 1, "assignments": [], "configs": []}],
            "timeout_ms": 30000, "validate_only": False,
        })  # fmt: skip
        assert created.topics[0].error_code == 0
        deadline = time.monotonic() + 30
        while True:
            _, md = conn.request(
                METADATA, {"topics": [{"name": "st", "topic_id": uuid.UUID(int=0)}]}, version=12
            )
            t = md.topics[0]
            if (t.error_code == 0 and len(t.partitions) == 3) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        tid = t.topic_id
        key = f"g:{to_base64(tid)}:0"
        while True:
            _, found = conn.request(FIND_COORDINATOR, {"key_type": 2, "coordinator_keys": [key]}, version=6)
            c = found.coordinators[0]
            if c.error_code not in RETRY or time.monotonic() > deadline + 30:
                break
            time.sleep(0.2)
        out: list[tuple[str, Any]] = [("find coordinator", c.error_code)]

        def read(what: str, leader_epoch: int, **kw: Any) -> None:
            p = _ask(
                conn,
                READ,
                0,
                _body(kw.pop("group", "g"), kw.pop("tid", tid), leader_epoch=leader_epoch, **kw),
            )
            if p is None:
                out.append((what, "no results"))
                return
            batches = [
                (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches
            ]
            out.append(
                (
                    what,
                    (E(p.error_code).name, p.state_epoch, p.start_offset, batches)
                    if p.error_code == 0
                    else E(p.error_code).name,
                )
            )

        def write(
            what: str,
            state_epoch: int,
            leader_epoch: int,
            start: int,
            *spec: tuple[int, int, int, int],
            partition: int = 0,
            group: str = "g",
        ) -> None:
            body = _body(group, tid, partition, state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start,
                         delivery_complete_count=-1, state_batches=_batches(*spec))  # fmt: skip
            out.append((what, E(_ask(conn, WRITE, 1, body).error_code).name))

        def initialize(what: str, state_epoch: int, start: int) -> None:
            p = _ask(conn, INITIALIZE, 0, _body("g", tid, state_epoch=state_epoch, start_offset=start))
            out.append((what, E(p.error_code).name))

        read("read before anything", 0)
        write("write before initialize", 0, 0, 0, (0, 0, 2, 1), partition=1)
        read("read after a write before initialize", 0, partition=1)
        p = _ask(conn, SUMMARY, 1, _body("g", tid, 2, leader_epoch=0))
        out.append(
            (
                "summary before initialize",
                (E(p.error_code).name, p.state_epoch, p.leader_epoch, p.start_offset),
            )
        )
        p = _ask(conn, INITIALIZE, 0, _body("g", tid, 7, state_epoch=0, start_offset=0))
        out.append(("initialize of an unknown partition", E(p.error_code).name))
        p = _ask(conn, DELETE, 0, _body("g", tid, 2))
        out.append(("delete before initialize", E(p.error_code).name))
        for api, version, fields in (
            (WRITE, 1, {"state_epoch": 0, "leader_epoch": 0, "start_offset": 0, "state_batches": []}),
            (INITIALIZE, 0, {"state_epoch": 0, "start_offset": 0}),
            (DELETE, 0, {}),
            (SUMMARY, 1, {"leader_epoch": 0}),
        ):
            p = _ask(conn, api, version, _body("", tid, **fields))
            out.append((f"api {api} with no group", E(p.error_code).name if p is not None else "no results"))
        initialize("initialize", 0, 5)
        read("read after initialize", 1)
        write("write", 0, 1, 5, (5, 9, 0, 1))
        write("write over it", 0, 1, -1, (6, 7, 2, 1))
        write("write moving the start", 0, 1, 7, (12, 13, 4, 5))
        read("read merged", 1)
        p = _ask(conn, SUMMARY, 1, _body("g", tid, leader_epoch=1))
        out.append(
            ("summary after writes", (E(p.error_code).name, p.state_epoch, p.leader_epoch, p.start_offset))
        )
        # overlaps the merge must settle as Kafka's combiner does: an older word (a lower delivery
        # count, a non-terminal state) over a newer one, batches straddling the start offset
        write("write of lower counts over higher", 0, 1, -1, (12, 15, 0, 2), (6, 9, 0, 1))
        write("write of a terminal state at the same count", 0, 1, -1, (14, 20, 4, 2))
        read("read merged again", 1)
        write("write moving the start into a batch", 0, 1, 13, (30, 31, 2, 1))
        read("read after the start moved", 1)
        read("read with no leader epoch", -1)
        write("write with no leader epoch", 0, -1, -1, (32, 32, 2, 1))
        write("write with no state epoch", -1, 1, -1, (33, 33, 2, 1))
        read("read after it", 1)
        write("write with an old leader epoch", 0, 0, -1, (8, 8, 2, 1))
        read("read with an old leader epoch", 0)
        read("read as a new leader", 3)
        write("write of the fenced leader", 0, 1, -1, (8, 8, 2, 1))
        initialize("initialize with a newer state epoch", 2, 20)
        write("write with an old state epoch", 1, 3, -1, (21, 21, 2, 1))
        initialize("initialize with an old state epoch", 1, 0)
        read("read after re-initialize", 3)
        p = _ask(conn, SUMMARY, 1, _body("g", tid, leader_epoch=3))
        out.append(("summary", (E(p.error_code).name, p.state_epoch, p.leader_epoch, p.start_offset)))
        read("read of an unknown topic", 0, tid=uuid.uuid4())
        write("write of an unknown partition", 0, 0, 0, partition=7)
        read("read with no group", 0, group="")
        d = _ask(conn, DELETE, 0, _body("g", tid))
        out.append(("delete", E(d.error_code).name))
        read("read after delete", 4)
        return out, tid
    finally:
        conn.close()


def _state_records(address: tuple[str, int], topic_id: uuid.UUID) -> list[Any]:
    """Every record of share-partition g/topic_id/0 in __share_group_state, decoded by kcompat
    (timestamps left out: they differ)."""
    key = ShareKey("g", topic_id, 0)
    out: list[Any] = []
    with Cluster(f"{address[0]}:{address[1]}") as cluster:
        t = cluster.topic(SHARE_GROUP_STATE)
        p = state_partition(key, len(t.partitions))
        position = 0
        while True:
            records, high, after = fetch(cluster, t, {p: position})
            for r in records:
                assert r.key is not None
                k, v = decode(r.key, r.value)
                if k != key:
                    continue
                kind = int.from_bytes(r.key[:2], "big")
                if v is None:
                    out.append((kind, "tombstone"))
                elif isinstance(v, ShareSnapshot):
                    out.append(
                        (kind, v.snapshot_epoch, v.state_epoch, v.leader_epoch, v.start_offset, v.batches)
                    )
                else:
                    out.append((kind, v.snapshot_epoch, v.leader_epoch, v.start_offset, v.batches))
            position = after.get(p, position)
            if position >= high.get(p, 0):
                return out


def test_share_state_apis_answer_as_kafka_does(kafka: tuple[str, int], kcompat: tuple[str, int]) -> None:
    theirs, their_topic = _sequence(kafka)
    ours, our_topic = _sequence(kcompat)
    diff = [(what, t, o) for (what, t), (_, o) in zip(theirs, ours, strict=True) if t != o]
    assert not diff, "\n".join(f"{what}: Kafka {t}, kcompat {o}" for what, t, o in diff)
    # ... and writes the same records, which each decodes: a share coordinator moving between a
    # Kafka broker and a kcompat one (a mixed cluster) replays the other's.
    their_records, our_records = _state_records(kafka, their_topic), _state_records(kcompat, our_topic)
    assert their_records, "Kafka wrote no records of the share-partition"
    diff_records = [
        (i, t, o) for i, (t, o) in enumerate(zip(their_records, our_records, strict=False)) if t != o
    ]
    assert len(their_records) == len(our_records) and not diff_records, (
        f"{len(their_records)} records in Kafka, {len(our_records)} in kcompat; first differences: {diff_records[:5]}"
    )
