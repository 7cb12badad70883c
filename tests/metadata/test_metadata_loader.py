"""MetadataLoader and MetadataDelta over batches built with kcompat's own record encoder."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kcompat.metadata import records as r
from kcompat.metadata.image import UNASSIGNED_DIRECTORY, MetadataImage
from kcompat.metadata.loader import MetadataLoader
from kcompat.wire.control_records import ControlType, control_key
from kcompat.wire.errors import DecodeError
from kcompat.wire.records import Record, build_batch

T1 = uuid.UUID(int=0x1234)
T2 = uuid.UUID(int=0x5678)
D1, D2, D3 = (uuid.UUID(int=n) for n in (0xD1, 0xD2, 0xD3))


def batch(base: int, *recs: tuple[int, int, dict[str, Any]], epoch: int = 1) -> bytes:
    return build_batch(
        [
            Record(base + i, 1_700_000_000_000, None, r.encode_record(k, v, body))
            for i, (k, v, body) in enumerate(recs)
        ],
        base_offset=base,
        partition_leader_epoch=epoch,
    )


def topic(name: str, tid: uuid.UUID) -> tuple[int, int, dict[str, Any]]:
    return (r.TOPIC, 0, {"name": name, "topic_id": tid})


def partition(
    tid: uuid.UUID, p: int, replicas: list[int], leader: int, dirs: list[uuid.UUID]
) -> tuple[int, int, dict[str, Any]]:
    body = {"partition_id": p, "topic_id": tid, "replicas": replicas, "isr": replicas, "removing_replicas": [],
            "adding_replicas": [], "leader": leader, "leader_epoch": 0, "partition_epoch": 0, "directories": dirs}  # fmt: skip
    return (r.PARTITION, 2, body)


def register(broker: int, epoch: int, fenced: bool = True) -> tuple[int, int, dict[str, Any]]:
    body = {"broker_id": broker, "incarnation_id": uuid.UUID(int=broker), "broker_epoch": epoch,
            "end_points": [{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9000 + broker, "security_protocol": 0}],
            "features": [{"name": "metadata.version", "min_supported_version": 7, "max_supported_version": 30}],
            "rack": None, "fenced": fenced, "in_controlled_shutdown": False, "log_dirs": [D1]}  # fmt: skip
    return (r.REGISTER_BROKER, 3, body)


def feature(name: str, level: int) -> tuple[int, int, dict[str, Any]]:
    return (r.FEATURE_LEVEL, 0, {"name": name, "feature_level": level})


BEGIN = (r.BEGIN_TRANSACTION, 0, {"name": "bootstrap"})
END = (r.END_TRANSACTION, 0, {})
ABORT = (r.ABORT_TRANSACTION, 0, {"reason": "test"})


def test_record_frame_round_trip_and_rejections() -> None:
    value = r.encode_record(r.FEATURE_LEVEL, 0, {"name": "metadata.version", "feature_level": 30})
    assert value[:3] == bytes([1, r.FEATURE_LEVEL, 0])
    key, version, body = r.decode_record(value)
    assert (key, version, body.name, body.feature_level) == (r.FEATURE_LEVEL, 0, "metadata.version", 30)
    for bad in (
        bytes([0]) + value[1:],
        bytes([1, 99, 0]),
        bytes([1, r.FEATURE_LEVEL, 9]) + value[3:],
        value + b"x",
    ):
        with pytest.raises(DecodeError):
            r.decode_record(bad)


def test_records_apply_only_below_the_high_watermark() -> None:
    loader = MetadataLoader()
    loader.append(batch(0, feature("metadata.version", 30), register(1, 0)) + batch(2, topic("a", T1)))
    assert loader.next_offset == 3
    assert loader.advance(1) is None  # the first batch ends at offset 1, not yet committed
    image = loader.advance(2)
    assert image is not None and image.offset == 1
    assert dict(image.features) == {"metadata.version": 30}
    assert image.brokers[1].fenced and image.brokers[1].endpoints[0].port == 9001
    assert image.topic("a") is None
    image = loader.advance(3)
    assert image is not None and image.offset == 2 and image.topic_ids["a"] == T1


def test_partition_change_absent_fields_mean_unchanged() -> None:
    loader = MetadataLoader()
    loader.append(batch(0, topic("a", T1), partition(T1, 0, [1, 2, 3], 1, [D1, D2, D3])))
    # ISR shrink only: leader and leader epoch stay, partition epoch goes up.
    loader.append(batch(2, (r.PARTITION_CHANGE, 0, {"partition_id": 0, "topic_id": T1, "isr": [1, 2]})))
    loader.advance(3)
    p = loader.image.partition("a", 0)
    assert p is not None
    assert (p.isr, p.leader, p.leader_epoch, p.partition_epoch) == ((1, 2), 1, 0, 1)
    # Leader -1: no leader, and the leader epoch goes up.
    loader.append(batch(3, (r.PARTITION_CHANGE, 0, {"partition_id": 0, "topic_id": T1, "leader": -1})))
    loader.advance(4)
    p = loader.image.partition("a", 0)
    assert p is not None and (p.leader, p.leader_epoch, p.partition_epoch, p.isr) == (-1, 1, 2, (1, 2))
    # New replicas without Directories keep the directories of kept replicas, unassigned for new ones.
    loader.append(
        batch(
            4, (r.PARTITION_CHANGE, 0, {"partition_id": 0, "topic_id": T1, "replicas": [2, 4], "leader": 2})
        )
    )
    loader.advance(5)
    p = loader.image.partition("a", 0)
    assert p is not None
    assert (p.replicas, p.directories, p.leader, p.leader_epoch) == ((2, 4), (D2, UNASSIGNED_DIRECTORY), 2, 2)


def test_transaction_is_buffered_until_end_and_dropped_on_abort() -> None:
    loader = MetadataLoader()
    loader.append(batch(0, BEGIN, feature("metadata.version", 30)) + batch(2, topic("a", T1)))
    assert loader.advance(3) is None  # inside an open transaction: nothing published
    assert loader.in_transaction and loader.image.offset == -1
    loader.append(batch(3, END))
    image = loader.advance(4)
    assert image is not None and image.offset == 3 and image.topic_ids["a"] == T1 and image.features
    loader.append(batch(4, topic("b", T2), BEGIN, topic("c", uuid.UUID(int=9))) + batch(7, ABORT))
    image = loader.advance(8)
    assert image is not None and image.offset == 7
    assert set(image.topic_ids) == {"a", "b"}  # before the transaction: kept; inside the aborted one: dropped


def test_control_batches_are_skipped_but_move_the_offset() -> None:
    loader = MetadataLoader()
    control = build_batch([Record(0, 0, control_key(ControlType.LEADER_CHANGE), b"\x00\x00\x00\x00\x00\x00\x00\x00")],
                          base_offset=0, control=True, partition_leader_epoch=1)  # fmt: skip
    loader.append(control + batch(1, topic("a", T1), epoch=1))
    image = loader.advance(2)
    assert image is not None and image.offset == 1 and image.epoch == 1 and "a" in image.topic_ids


def test_brokers_fence_unfence_shutdown_unregister() -> None:
    loader = MetadataLoader()
    loader.append(batch(0, register(1, 10), register(2, 11, fenced=False)))
    loader.append(
        batch(2, (r.BROKER_REGISTRATION_CHANGE, 2, {"broker_id": 1, "broker_epoch": 10, "fenced": -1}))
    )
    loader.append(batch(3, (r.BROKER_REGISTRATION_CHANGE, 1, {"broker_id": 2, "broker_epoch": 11, "fenced": 0,
                                                             "in_controlled_shutdown": 1})))  # fmt: skip
    loader.append(
        batch(4, (r.BROKER_REGISTRATION_CHANGE, 0, {"broker_id": 1, "broker_epoch": 9, "fenced": 1}))
    )
    loader.advance(5)
    b1, b2 = loader.image.brokers[1], loader.image.brokers[2]
    assert not b1.fenced  # the stale epoch 9 did not fence it again
    assert not b2.fenced and b2.in_controlled_shutdown
    loader.append(
        batch(
            5,
            (r.FENCE_BROKER, 0, {"id": 1, "epoch": 10}),
            (r.UNREGISTER_BROKER, 0, {"broker_id": 2, "broker_epoch": 11}),
        )
    )
    loader.advance(7)
    assert loader.image.brokers[1].fenced and set(loader.image.brokers) == {1}


def test_configs_features_producer_ids_and_topic_removal() -> None:
    loader = MetadataLoader()
    loader.append(batch(0, topic("a", T1), partition(T1, 0, [1], 1, [D1]),
                        (r.CONFIG, 0, {"resource_type": 2, "resource_name": "a", "name": "retention.ms", "value": "5"}),
                        (r.CONFIG, 0, {"resource_type": 4, "resource_name": "", "name": "min.insync.replicas", "value": "1"}),
                        feature("group.version", 1), (r.PRODUCER_IDS, 0, {"broker_id": 1, "broker_epoch": 1,
                                                                         "next_producer_id": 1000})))  # fmt: skip
    image = loader.advance(6)
    assert image is not None
    assert dict(image.configs[(2, "a")]) == {"retention.ms": "5"}
    assert image.next_producer_id == 1000 and image.features["group.version"] == 1
    before = image
    loader.append(batch(6, (r.CONFIG, 0, {"resource_type": 4, "resource_name": "", "name": "min.insync.replicas", "value": None}),
                        feature("group.version", 0), (r.REMOVE_TOPIC, 0, {"topic_id": T1})))  # fmt: skip
    image = loader.advance(9)
    assert image is not None
    assert image.topic("a") is None and (2, "a") not in image.configs and (4, "") not in image.configs
    assert "group.version" not in image.features
    assert before.partition("a", 0) is not None  # the older image is unchanged


def test_clear_elr_and_unchanged_topics_are_shared() -> None:
    loader = MetadataLoader()
    loader.append(
        batch(
            0,
            topic("a", T1),
            partition(T1, 0, [1, 2], 1, [D1, D2]),
            topic("b", T2),
            partition(T2, 0, [1], 1, [D1]),
        )
    )
    loader.append(
        batch(
            4,
            (
                r.PARTITION_CHANGE,
                2,
                {"partition_id": 0, "topic_id": T1, "isr": [1], "eligible_leader_replicas": [2]},
            ),
        )
    )
    first = loader.advance(5)
    assert first is not None
    p = first.partition("a", 0)
    assert p is not None and p.elr == (2,)
    loader.append(batch(5, (r.CLEAR_ELR, 0, {"topic_name": ""})))
    image = loader.advance(6)
    assert image is not None
    p = image.partition("a", 0)
    assert p is not None and p.elr == () and p.partition_epoch == 2
    assert image.topics_by_id[T2] is first.topics_by_id[T2]


def test_truncate_drops_fetched_batches_not_yet_applied() -> None:
    loader = MetadataLoader()
    loader.append(batch(0, topic("a", T1), epoch=1) + batch(1, topic("b", T2), epoch=2))
    assert (loader.next_offset, loader.last_fetched_epoch) == (2, 2)
    loader.advance(1)
    loader.truncate(1)
    assert (loader.next_offset, loader.last_fetched_epoch) == (1, 1)
    loader.append(batch(1, topic("c", uuid.UUID(int=7)), epoch=3))
    image = loader.advance(2)
    assert image is not None and set(image.topic_ids) == {"a", "c"}
    assert MetadataImage().offset == -1


def test_a_snapshot_replaces_the_image_and_fetching_resumes_at_its_end() -> None:
    loader = MetadataLoader()
    loader.append(batch(0, topic("old", T2)) + batch(1, BEGIN))
    loader.advance(2)
    assert loader.in_transaction
    header = build_batch([Record(0, 0, control_key(ControlType.SNAPSHOT_HEADER), b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00")],
                         base_offset=0, control=True, partition_leader_epoch=3)  # fmt: skip
    snapshot = header + batch(
        1, feature("metadata.version", 30), topic("a", T1), partition(T1, 0, [1], 1, [D1]), epoch=3
    )
    image = loader.load_snapshot(snapshot, end_offset=120, epoch=3)
    assert (image.offset, image.epoch, loader.next_offset, loader.last_fetched_epoch) == (119, 3, 120, 3)
    assert set(image.topic_ids) == {"a"} and not loader.in_transaction
    p = image.partition("a", 0)
    assert p is not None and p.leader == 1
    loader.append(batch(120, topic("b", T2), epoch=3))
    image = loader.advance(121)
    assert image is not None and set(image.topic_ids) == {"a", "b"} and image.offset == 120


def test_acl_records_add_and_remove_by_id() -> None:
    from kcompat.security.authorizer import AclBinding

    a1, a2 = uuid.UUID(int=0xA1), uuid.UUID(int=0xA2)

    def acl(i: uuid.UUID, name: str, op: int) -> tuple[int, int, dict[str, Any]]:
        return (r.ACCESS_CONTROL_ENTRY, 0, {"id": i, "resource_type": 2, "resource_name": name, "pattern_type": 3,
                                            "principal": "User:alice", "host": "*", "operation": op, "permission_type": 3})  # fmt: skip

    loader = MetadataLoader()
    loader.append(batch(0, acl(a1, "orders", 3), acl(a2, "pay-", 4)))
    image = loader.advance(2)
    assert image is not None
    assert image.acls[a1] == AclBinding(2, "orders", 3, "User:alice", "*", 3, 3) and len(image.acls) == 2
    before = image
    loader.append(batch(2, (r.REMOVE_ACCESS_CONTROL_ENTRY, 0, {"id": a1}), feature("group.version", 1)))
    image = loader.advance(4)
    assert image is not None and list(image.acls) == [a2] and len(before.acls) == 2
    loader.append(batch(4, feature("group.version", 0)))
    later = loader.advance(5)
    assert later is not None and later.acls is image.acls  # unchanged ACLs are shared
