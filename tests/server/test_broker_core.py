"""Broker.handle: dispatch, ApiVersions from the handler table, what closes a connection, restarts."""

from __future__ import annotations

import dataclasses
import struct
import time
from pathlib import Path

import pytest

from kcompat.server.dispatcher import CloseConnection, load_handlers
from kcompat.server.registry import HANDLERS, registration
from kcompat.testing import wait_until_async
from kcompat.wire.messages.api_versions import API_VERSIONS
from kcompat.wire.messages.init_producer_id import INIT_PRODUCER_ID
from kcompat.wire.messages.metadata import METADATA
from kcompat.wire.messages.produce import PRODUCE
from kcompat.wire.protocol import decode_response, encode_request
from tests.server.broker_harness import BrokerHarness, HarnessFactory, batch, flatten


@pytest.fixture
def h(broker_harness: HarnessFactory) -> BrokerHarness:
    return broker_harness()


def ranges(resp) -> dict[int, tuple[int, int]]:
    return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_lists_the_handler_table(h: BrokerHarness, version: int) -> None:
    body = {"client_software_name": "weird name!", "client_software_version": "?"} if version >= 3 else {}
    resp = h.call(API_VERSIONS, version, body)
    assert resp.error_code == 0
    got = ranges(resp)
    load_handlers()  # what every handler module registers: the index ApiVersions answers from must agree
    assert got == {key: (r.advertised_min, r.max_version) for key, r in HANDLERS.items()}
    if version >= 3:  # features: v3 leaves out those whose minimum is 0 (KAFKA-17011), v4 lists them
        supported = [(f.name, f.min_version, f.max_version) for f in resp.supported_features]
        assert supported == ([] if version == 3 else [
            ("group.version", 0, 1), ("transaction.version", 0, 2),
            ("eligible.leader.replicas.version", 0, 1), ("share.version", 0, 1), ("streams.version", 0, 1),
        ])  # fmt: skip
        finalized = {f.name: (f.min_version_level, f.max_version_level) for f in resp.finalized_features}
        assert finalized == {
            "group.version": (1, 1), "transaction.version": (2, 2),
            "share.version": (1, 1), "eligible.leader.replicas.version": (1, 1), "streams.version": (1, 1),
        }  # fmt: skip
        assert resp.finalized_features_epoch == 0


def test_group_version_is_not_finalized_without_the_consumer_protocol(broker_harness: HarnessFactory) -> None:
    h = broker_harness({"group.coordinator.rebalance.protocols": "classic"})
    resp = h.call(API_VERSIONS, 4, {"client_software_name": "x", "client_software_version": "1"})
    assert "group.version" in [f.name for f in resp.supported_features]
    assert "group.version" not in [f.name for f in resp.finalized_features]


def test_advertised_ranges_cover_the_client_matrix(h: BrokerHarness) -> None:
    got = ranges(h.call(API_VERSIONS, 4, {"client_software_name": "kcompat", "client_software_version": "1"}))

    def covers(key: int, *versions: int) -> bool:
        low, high = got[key]
        return all(low <= v <= high for v in versions)

    assert covers(0, 0, 3, 7, 8)  # Produce: librdkafka < 2.11.1 needs 0, 3 and 7
    assert got[0][1] == 13  # topic ids; v12's transactions v2 stays off: no finalized transaction.version
    assert covers(
        1, 4, 10, 11, 12, 13, 16, 17, 18
    )  # Fetch: 4 and 10 for old librdkafka, up to Kafka 4.3's 18
    assert covers(2, 1, 5, 7)  # ListOffsets
    assert covers(3, 4, 5, 8)  # Metadata (aiokafka <= 5)
    assert covers(18, 0, 3, 4)
    assert covers(22, 0, 3)  # InitProducerId: 0 for aiokafka / old librdkafka, 3 for KIP-360
    assert covers(23, 2, 3)
    assert (
        covers(19, 2, 3, 4)
        and covers(20, 1, 3)
        and covers(32, 1, 2, 3)
        and covers(44, 0)
        and covers(21, 0, 1)
    )


def test_unknown_api_versions_version_gets_a_v0_error_with_our_range(h: BrokerHarness) -> None:
    # ApiVersions v9 from a future client: header v2 (flexible), a body we must not parse.
    header = struct.pack(">hhih", 18, 9, 77, 3) + b"abc" + b"\x00"
    frame = struct.pack(">i", len(header) + 5) + header + b"\xff\xff\xff\xff\xff"
    data = flatten(h.raw(frame))
    correlation, resp = decode_response(18, 0, data[4:])
    assert correlation == 77
    assert resp.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == [(18, 0, 4)]


def test_garbage_closes_the_connection(h: BrokerHarness) -> None:
    with pytest.raises(CloseConnection):
        h.raw(struct.pack(">i", 3) + b"abc")
    frame = encode_request(3, 12, 1, {"topics": None})
    with pytest.raises(CloseConnection):
        h.raw(frame[:-3])  # truncated body
    with pytest.raises(CloseConnection):
        h.raw(struct.pack(">ihhih", 10, 999, 0, 1, 0))  # an API key nobody declares


def test_bytes_after_a_body_are_ignored_as_kafka_does(h: BrokerHarness) -> None:
    # librdkafka's admin Metadata v12, byte for byte: 3 bytes more than the v12 schema holds.
    body = bytes.fromhex("0003000c00000003000772646b61666b610000000000010000")
    data = flatten(h.raw(struct.pack(">i", len(body)) + body))
    correlation, resp = decode_response(3, 12, data[4:])
    assert correlation == 3 and resp.brokers[0].node_id == h.broker.node_id


def test_declared_but_unadvertised_versions_close_the_connection(h: BrokerHarness) -> None:
    # InitProducerId v6 (KIP-939 two-phase commit) is declared by the codec but not served.
    assert 6 in INIT_PRODUCER_ID.versions and (reg := registration(22)) is not None and reg.max_version < 6
    body = {"transactional_id": None, "transaction_timeout_ms": 1000}
    with pytest.raises(CloseConnection):
        h.raw(encode_request(22, 6, 5, body))


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_v0_to_2_are_advertised_but_refused(h: BrokerHarness, version: int) -> None:
    # Kafka 4 removed them (the declaration starts at 3), but ApiVersions still lists 0 (KAFKA-18659)
    assert 2 not in PRODUCE.versions
    got = ranges(h.call(API_VERSIONS, 3, {"client_software_name": "x", "client_software_version": "1"}))
    assert got[0][0] == 0
    # header v1 (key, version, correlation id, client id), then v0-2's acks, timeout, no topics
    frame = struct.pack(">hhih1shii", 0, version, 5, 1, b"c", 1, 100, 0)
    with pytest.raises(CloseConnection):
        h.raw(frame)


def test_state_survives_a_restart(h: BrokerHarness, tmp_path: Path) -> None:
    md = h.call(METADATA, 12, {"topics": [{"name": "keep"}], "allow_auto_topic_creation": True})
    topic_id = md.topics[0].topic_id
    cluster_id = md.cluster_id
    pid1 = h.call(INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": 1000}).producer_id
    h.call(
        PRODUCE,
        9,
        {
            "acks": -1,
            "timeout_ms": 100,
            "topic_data": [{"name": "keep", "partition_data": [{"index": 0, "records": batch(b"x")}]}],
        },
    )
    h.restart()
    md2 = h.call(METADATA, 12, {"topics": None})
    assert md2.cluster_id == cluster_id
    assert [(t.name, t.topic_id) for t in md2.topics] == [("keep", topic_id)]
    assert "cluster.id=" + cluster_id in (tmp_path / "data" / "meta.properties").read_text()
    pid2 = h.call(INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": 1000}).producer_id
    assert pid2 > pid1  # producer ids are never handed out twice
    assert h.broker.replicas.partition_log("keep", 0).log_end_offset == 1


def test_retention_runs_on_its_interval(broker_harness: HarnessFactory) -> None:
    from kcompat.wire.messages.create_topics import CREATE_TOPICS

    # The clock starts at the records' own time, so nothing expires while they are written (the
    # maintenance loop may run between two produces on a loaded machine), then jumps to today.
    now = [1_700_000_000.0]
    h = broker_harness({"log.retention.check.interval.ms": "50"}, clock=lambda: now[0])
    configs = [{"name": "retention.ms", "value": "1000"}, {"name": "segment.ms", "value": "1"}]
    h.call(CREATE_TOPICS, 7, {"topics": [{"name": "old", "num_partitions": 1, "replication_factor": 1,
                                          "configs": configs}], "timeout_ms": 100})  # fmt: skip
    for value in (b"a", b"b", b"c"):  # timestamps of 2023 (batch's ts)
        h.call(PRODUCE, 9, {"acks": 1, "timeout_ms": 100,
                            "topic_data": [{"name": "old", "partition_data": [{"index": 0, "records": batch(value)}]}]})  # fmt: skip
        now[0] += 0.01  # segment.ms=1: each append rolls a new segment
    plog = h.broker.replicas.partition_log("old", 0)
    h.run(h.broker.run_maintenance())  # nothing past retention.ms yet
    assert plog.log_start_offset == 0
    now[0] = time.time()  # the records are now long past retention.ms
    h.run(
        wait_until_async(lambda: plog.log_start_offset == 3)
    )  # the maintenance loop, not a direct call, deletes them
    assert (plog.log_start_offset, plog.log_end_offset) == (
        3,
        3,
    )  # all expired: Kafka rolls, then deletes all


@pytest.mark.parametrize("raised", [RuntimeError("boom"), CloseConnection("the handler's own reason")])
def test_a_failing_handler_closes_the_connection_counted_and_logged(
    h: BrokerHarness, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, raised: Exception
) -> None:
    async def fails(ctx: object, request: object) -> None:
        raise raised

    monkeypatch.setitem(HANDLERS, 3, dataclasses.replace(registration(3), handler=fails))
    with pytest.raises(CloseConnection) as closed:
        h.raw(encode_request(3, 12, 1, {"topics": None}))
    unexpected = isinstance(raised, RuntimeError)
    assert str(closed.value) == (
        "Metadata handler failed: boom" if unexpected else "the handler's own reason"
    )
    assert h.broker.stats.requests[3].error_codes == {-1: 1}  # UNKNOWN_SERVER_ERROR
    logged = [r for r in caplog.records if "failed" in r.getMessage() and r.exc_info]
    assert [r.exc_info[1] for r in logged if r.exc_info] == ([raised] if unexpected else [])
