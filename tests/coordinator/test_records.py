"""__consumer_offsets record formats: golden bytes derived by hand from the JSON specs, round trips,
bad input, and a cross-check against Apache Kafka's own decoder when its jars are present.

kafka-python ships no decoder for these records (it has no group-coordinator record classes), so
the independent check is Kafka's GroupCoordinatorRecordSerde from kafka-group-coordinator-*.jar.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import kcompat.coordinator.streams_records as srec
from kcompat.coordinator import records as rec
from kcompat.wire.errors import DecodeError
from kcompat.wire.messages import group_records
from kcompat.wire.schema import Message

TOPIC_ID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")


# Declared fields the typed records leave out (read past on decode, written with their defaults).
NOT_KEPT = {
    "ConsumerGroupPartitionMetadataValue.topics": {"partition_metadata"},  # racks: unused since Kafka 4.0
    "ConsumerGroupMemberMetadataValue": {"classic_member_metadata"},  # classic members of a consumer group
    # Added by Kafka 4.1-4.3's specs; kcompat writes their defaults and reads past them for now.
    "ConsumerGroupMetadataValue": {"metadata_hash"},  # KIP-1101 subscription hash
    "ConsumerGroupTargetAssignmentMetadataValue": {"assignment_timestamp"},
    "OffsetCommitValue": {"topic_id"},
}


DECLARED = {m.name: m for m in vars(group_records).values() if isinstance(m, Message)}


def _declared(fields: tuple) -> dict[str, tuple]:
    return {f.name: f.fields for f in fields}


@pytest.mark.parametrize("name", sorted(n for n in DECLARED if not n.startswith("StreamsGroup")))
def test_typed_records_name_the_declared_fields(name: str) -> None:
    """The typed classes repeat no schema of their own: their fields are the declaration's, by name."""
    cls = getattr(rec, name)
    declared = _declared(DECLARED[name].fields)
    assert {f.name for f in dataclasses.fields(cls)} == set(declared) - NOT_KEPT.get(name, set())
    nested = {"GroupMetadataValue": ("members", rec.GroupMemberMetadata),
              "ConsumerGroupPartitionMetadataValue": ("topics", rec.TopicMetadata)}  # fmt: skip
    if name in nested:
        field, sub = nested[name]
        kept = set(_declared(declared[field])) - NOT_KEPT.get(f"{name}.{field}", set())
        assert {f.name for f in dataclasses.fields(sub)} == kept


@pytest.mark.parametrize(
    "name", sorted(n for n in DECLARED if n.startswith("StreamsGroup") and n.endswith("Key"))
)
def test_streams_group_keys_name_the_declared_fields(name: str) -> None:
    """Streams groups' values keep the declaration's own fields (a mapping); their keys are typed."""
    assert {f.name for f in dataclasses.fields(getattr(srec, name))} == set(_declared(DECLARED[name].fields))


def test_streams_group_records_round_trip_in_kafkas_format() -> None:
    key = srec.StreamsGroupMetadataKey("app")
    value = srec.StreamsGroupMetadataValue({"epoch": 7, "metadata_hash": 0, "validated_topology_epoch": 0})
    made = rec.make(key, value)
    # int16 type 17 | STRING "app"; value: int16 version 0 | int32 epoch | int64 hash | tagged fields
    assert made.key == bytes.fromhex("00110003617070")
    assert made.value is not None and made.value.startswith(bytes.fromhex("0000000000070000000000000000"))
    decoded = rec.decode(made)
    assert decoded is not None and decoded.key == key
    assert isinstance(decoded.value, srec.StreamsGroupMetadataValue) and decoded.value.fields["epoch"] == 7


def test_offset_commit_key_golden() -> None:
    key = rec.encode_key(rec.OffsetCommitKey("g1", "t", 3))
    # int16 type 1 | STRING "g1" | STRING "t" | int32 3
    assert key == bytes.fromhex("00010002673100017400000003")
    assert rec.decode_key(key) == rec.OffsetCommitKey("g1", "t", 3)


def test_offset_commit_value_v3_golden() -> None:
    value = rec.OffsetCommitValue(offset=42, metadata="m", commit_timestamp=1000, leader_epoch=5)
    data = rec.encode_value(value)
    # int16 version 3 | int64 offset | int32 leader epoch | STRING metadata | int64 commit timestamp
    assert data == bytes.fromhex("0003000000000000002a0000000500016d00000000000003e8")
    assert rec.decode_value(rec.OffsetCommitKey("g1", "t", 3), data) == value


def test_offset_commit_value_with_expiry_is_v1() -> None:
    value = rec.OffsetCommitValue(7, "", 1000, -1, 5000)
    data = rec.encode_value(value)
    # v1: offset, metadata, commit timestamp, expire timestamp (no leader epoch)
    assert data == bytes.fromhex("00010000000000000007000000000000000003e80000000000001388")
    assert rec.decode_value(rec.OffsetCommitKey("g", "t", 0), data) == value


def test_old_offset_commit_values_decode() -> None:
    key = rec.OffsetCommitKey("g", "t", 0)
    v0 = bytes.fromhex("00000000000000000009000268690000000000000064")
    assert rec.decode_value(key, v0) == rec.OffsetCommitValue(9, "hi", 100)
    # v4 (flexible): compact metadata, then an empty tagged-field section
    v4 = bytes.fromhex("0004000000000000000900000002036869000000000000006400")
    assert rec.decode_value(key, v4) == rec.OffsetCommitValue(9, "hi", 100, 2)


def test_group_metadata_v3_golden() -> None:
    member = rec.GroupMemberMetadata("m", "c", "h", 10000, b"\x01", b"\x02", 20000, "i")
    value = rec.GroupMetadataValue("consumer", 4, "range", "m", (member,), 77)
    data = rec.encode_value(value)
    expected = bytes.fromhex(
        "0003"  # version
        "0008"
        + b"consumer".hex()  # protocol_type
        + "00000004"  # generation
        "0005"
        + b"range".hex()  # protocol
        + "0001"
        "6d"  # leader "m"
        "000000000000004d"  # current_state_timestamp 77
        "00000001"  # one member
        "0001"
        "6d"  # member_id
        "0001"
        "69"  # group_instance_id
        "0001"
        "63"  # client_id
        "0001"
        "68"  # client_host
        "00004e20"  # rebalance_timeout 20000
        "00002710"  # session_timeout 10000
        "00000001"
        "01"  # subscription
        "00000001"
        "02"  # assignment
    )
    assert data == expected
    assert rec.encode_key(rec.GroupMetadataKey("g")) == bytes.fromhex("0002000167")
    assert rec.decode_value(rec.GroupMetadataKey("g"), data) == value


def test_group_metadata_v0_decodes_with_defaults() -> None:
    data = bytes.fromhex("000000016100000001ffffffff0000000100016d000163000168000013880000000000000000")
    v = rec.decode_value(rec.GroupMetadataKey("g"), data)
    assert v == rec.GroupMetadataValue(
        "a", 1, None, None, (rec.GroupMemberMetadata("m", "c", "h", 5000, b"", b""),), -1
    )


def test_consumer_group_metadata_golden() -> None:
    assert rec.encode_key(rec.ConsumerGroupMetadataKey("g")) == bytes.fromhex("0003000167")
    # v0 flexible: int32 epoch, empty tagged fields
    assert rec.encode_value(rec.ConsumerGroupMetadataValue(7)) == bytes.fromhex("00000000000700")


def test_target_assignment_member_golden() -> None:
    value = rec.ConsumerGroupTargetAssignmentMemberValue(((TOPIC_ID, (0, 2)),))
    data = rec.encode_value(value)
    # compact array of 1 | uuid | compact array of 2 | 0 | 2 | tags | tags
    assert data == bytes.fromhex("000002" + TOPIC_ID.hex + "0300000000000000020000")
    assert rec.encode_key(rec.ConsumerGroupTargetAssignmentMemberKey("g", "m")) == bytes.fromhex(
        "000700016700016d"
    )


ALL_RECORDS: list[tuple[rec.RecordKey, rec.RecordValue | None]] = [
    (rec.OffsetCommitKey("grp", "topic-a", 5), rec.OffsetCommitValue(123, "meta", 1700000000000, 3)),
    (rec.OffsetCommitKey("grp", "topic-a", 6), rec.OffsetCommitValue(9, "", 1000, -1, 2000)),
    (rec.OffsetCommitKey("grp", "topic-a", 7), None),
    (
        rec.GroupMetadataKey("grp"),
        rec.GroupMetadataValue(
            "consumer",
            3,
            "range",
            "m1",
            (
                rec.GroupMemberMetadata("m1", "cid", "/10.0.0.1", 45000, b"sub", b"asg", 300000, None),
                rec.GroupMemberMetadata("m2", "cid", "/10.0.0.2", 45000, b"", b"", 300000, "inst-2"),
            ),
            1700000000001,
        ),
    ),
    (rec.GroupMetadataKey("empty"), rec.GroupMetadataValue("", 0, None, None, (), 5)),
    (rec.ConsumerGroupMetadataKey("cg"), rec.ConsumerGroupMetadataValue(11)),
    (
        rec.ConsumerGroupPartitionMetadataKey("cg"),
        rec.ConsumerGroupPartitionMetadataValue((rec.TopicMetadata(TOPIC_ID, "orders", 6),)),
    ),
    (
        rec.ConsumerGroupMemberMetadataKey("cg", "mem"),
        rec.ConsumerGroupMemberMetadataValue(
            "client", "/1.2.3.4", ("a", "b"), "inst", "rack-1", "ord.*", 60000, "uniform"
        ),
    ),
    (rec.ConsumerGroupTargetAssignmentMetadataKey("cg"), rec.ConsumerGroupTargetAssignmentMetadataValue(10)),
    (
        rec.ConsumerGroupTargetAssignmentMemberKey("cg", "mem"),
        rec.ConsumerGroupTargetAssignmentMemberValue(((TOPIC_ID, (0, 1, 2)),)),
    ),
    (
        rec.ConsumerGroupCurrentMemberAssignmentKey("cg", "mem"),
        rec.ConsumerGroupCurrentMemberAssignmentValue(10, 9, 1, ((TOPIC_ID, (0, 1)),), ((TOPIC_ID, (2,)),)),
    ),
    (rec.ConsumerGroupMemberMetadataKey("cg", "gone"), None),
]


@pytest.mark.parametrize(("key", "value"), ALL_RECORDS)
def test_round_trip(key: rec.RecordKey, value: rec.RecordValue | None) -> None:
    record = rec.make(key, value)
    decoded = rec.decode(record)
    assert decoded is not None
    assert decoded.key == key and decoded.value == value
    assert rec.group_of(key) == (
        "empty"
        if key == rec.GroupMetadataKey("empty")
        else key.__dict__.get("group", key.__dict__.get("group_id"))
    )


def test_unknown_record_types_are_skipped() -> None:
    assert rec.decode_key(bytes.fromhex("000a000167")) is None  # a share-group key


@pytest.mark.parametrize(("key", "value"), [kv for kv in ALL_RECORDS if kv[1] is not None])
def test_every_truncation_is_a_decode_error(key: rec.RecordKey, value: rec.RecordValue) -> None:
    k, v = rec.make(key, value)
    assert v is not None
    for cut in range(len(k)):
        with pytest.raises(DecodeError):
            rec.decode_key(k[:cut])
    for cut in range(len(v)):
        with pytest.raises(DecodeError):
            rec.decode_value(key, v[:cut])
    with pytest.raises(DecodeError):
        rec.decode_value(key, v + b"\x00")


@given(st.binary(max_size=64), st.binary(max_size=64))
def test_garbage_raises_only_decode_error(k: bytes, v: bytes) -> None:
    with contextlib.suppress(DecodeError):
        rec.decode((k, v))


@given(
    st.text(max_size=20),
    st.text(max_size=20),
    st.integers(0, 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1),
    st.text(max_size=30),
    st.integers(-1, 2**31 - 1),
)
def test_offset_commit_round_trip_property(
    group: str, topic: str, partition: int, offset: int, meta: str, epoch: int
) -> None:
    key = rec.OffsetCommitKey(group, topic, partition)
    value = rec.OffsetCommitValue(offset, meta, 1, epoch)
    decoded = rec.decode(rec.make(key, value))
    assert decoded is not None and decoded.key == key and decoded.value == value


def test_offsets_partition_matches_java_string_hashcode() -> None:
    # Java: "group".hashCode() == 98629247; abs % 50 == 47. "" hashes to 0.
    assert rec.offsets_partition("group", 50) == 98629247 % 50
    assert rec.offsets_partition("", 50) == 0
    # A string whose Java hashCode is negative: "polygenelubricants" hashes to Integer.MIN_VALUE -> 0.
    assert rec.offsets_partition("polygenelubricants", 50) == 0


JAVA_DECODER = """
import java.nio.ByteBuffer;
import java.util.HexFormat;
import org.apache.kafka.coordinator.group.GroupCoordinatorRecordSerde;

public class Decode {
    public static void main(String[] args) throws Exception {
        GroupCoordinatorRecordSerde serde = new GroupCoordinatorRecordSerde();
        java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] kv = line.trim().split(" ", -1);
            ByteBuffer k = ByteBuffer.wrap(HexFormat.of().parseHex(kv[0]));
            ByteBuffer v = kv[1].equals("-") ? null : ByteBuffer.wrap(HexFormat.of().parseHex(kv[1]));
            var r = serde.deserialize(k, v);
            System.out.println(r.key() + " => " + r.value());
        }
    }
}
"""

JARS = Path(__file__).resolve().parents[2] / ".deps" / "kafka"


def test_kafka_own_decoder_reads_our_records(tmp_path: Path) -> None:
    if shutil.which("java") is None or not list(JARS.glob("kafka-group-coordinator-*.jar")):
        pytest.skip("needs java and Kafka's jars in .deps/kafka (make install-test)")
    src = tmp_path / "Decode.java"
    src.write_text(JAVA_DECODER)
    lines = []
    for key, value in ALL_RECORDS:
        k, v = rec.make(key, value)
        lines.append(f"{k.hex()} {'-' if v is None else v.hex()}")
    out = subprocess.run(
        ["java", "-cp", f"{JARS}/*", str(src)],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.splitlines()
    assert len(out) == len(ALL_RECORDS)
    expect = [
        [
            "OffsetCommitKey(group='grp', topic='topic-a', partition=5)",
            "offset=123",
            "leaderEpoch=3",
            "metadata='meta'",
            "commitTimestamp=1700000000000",
            "at version 3",
        ],
        ["partition=6", "offset=9", "commitTimestamp=1000", "expireTimestamp=2000", "at version 1"],
        ["partition=7", "=> null"],
        [
            "GroupMetadataKey(group='grp')",
            "protocolType='consumer'",
            "generation=3",
            "protocol='range'",
            "leader='m1'",
            "currentStateTimestamp=1700000000001",
            "memberId='m1'",
            "groupInstanceId=null",
            "clientHost='/10.0.0.1'",
            "rebalanceTimeout=300000",
            "sessionTimeout=45000",
            "subscription=[115, 117, 98]",
            "memberId='m2'",
            "groupInstanceId='inst-2'",
            "at version 3",
        ],
        ["GroupMetadataKey(group='empty')", "protocolType=''", "generation=0", "protocol=null", "members=[]"],
        ["ConsumerGroupMetadataKey(groupId='cg')", "epoch=11"],
        ["ConsumerGroupPartitionMetadataKey(groupId='cg')", "topicName='orders'", "numPartitions=6"],
        [
            "ConsumerGroupMemberMetadataKey(groupId='cg', memberId='mem')",
            "instanceId='inst'",
            "rackId='rack-1'",
            "clientId='client'",
            "subscribedTopicNames=[a, b]",
            "subscribedTopicRegex='ord.*'",
            "rebalanceTimeoutMs=60000",
            "serverAssignor='uniform'",
        ],
        ["ConsumerGroupTargetAssignmentMetadataKey(groupId='cg')", "assignmentEpoch=10"],
        ["ConsumerGroupTargetAssignmentMemberKey(groupId='cg', memberId='mem')", "partitions=[0, 1, 2]"],
        [
            "ConsumerGroupCurrentMemberAssignmentKey(groupId='cg', memberId='mem')",
            "memberEpoch=10",
            "previousMemberEpoch=9",
            "state=1",
            "partitions=[0, 1]",
            "partitions=[2]",
        ],
        ["ConsumerGroupMemberMetadataKey(groupId='cg', memberId='gone')", "=> null"],
    ]
    for line, fragments in zip(out, expect, strict=True):
        for f in fragments:
            assert f in line, (f, line)
