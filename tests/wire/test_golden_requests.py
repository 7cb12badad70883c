"""Requests captured from real clients decode and re-encode byte for byte.

The frames under golden/requests/<client>/ were recorded by tools/capture_requests.py from
kafka-python, confluent-kafka (librdkafka) and the Java client 3.9 talking to a throwaway responder,
and from the Java client 4.3.1 (tools/capture_requests.py --java-4.3) at its newest versions
against a real kcompat advertising Kafka 4.3's ranges.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kcompat.wire import protocol
from kcompat.wire.codec import MessageCodec
from kcompat.wire.messages.headers import REQUEST_HEADER
from kcompat.wire.primitives import Writer
from kcompat.wire.record_batch import crc_ok, read_header, split_batches

GOLDEN = Path(__file__).parent / "golden" / "requests"
FRAMES = sorted(GOLDEN.rglob("*.hex"))
HEADER = MessageCodec(REQUEST_HEADER)


def test_captures_cover_both_clients_and_the_hot_apis() -> None:
    names = {f"{p.parent.name}/{p.stem}" for p in FRAMES}
    for client in ("kafka-python", "librdkafka", "java-3.9"):
        for api in ("ApiVersions", "Metadata", "Produce", "Fetch", "InitProducerId"):
            assert any(n.startswith(f"{client}/{api}-v") for n in names), (client, api)


def test_java_4_3_captures_are_at_the_newest_versions() -> None:
    names = {p.stem for p in FRAMES if p.parent.name == "java-4.3"}
    for stem in ("ApiVersions-v4", "Metadata-v13", "CreateTopics-v7", "InitProducerId-v5", "Produce-v13",
                 "FindCoordinator-v6", "JoinGroup-v9", "SyncGroup-v5", "Heartbeat-v4", "OffsetCommit-v10",
                 "OffsetFetch-v10", "ListOffsets-v11", "ConsumerGroupHeartbeat-v1"):  # fmt: skip
        assert stem in names, (stem, sorted(names))


@pytest.mark.parametrize("path", FRAMES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_decode_and_reencode_identically(path: Path) -> None:
    frame = bytes.fromhex(path.read_text().strip())
    req = protocol.decode_request(frame)
    assert f"{protocol.api(req.api_key).name}-v{req.api_version}" == path.stem
    w = Writer()
    HEADER.write(w, req.header, protocol.request_header_version(req.api_key, req.api_version))
    protocol.request_codec(req.api_key).write(w, req.body, req.api_version)
    assert w.getvalue() == frame


def test_captured_produce_batches_are_valid_v2_batches() -> None:
    produces = [p for p in FRAMES if p.stem.startswith("Produce-")]
    assert produces
    for path in produces:
        req = protocol.decode_request(bytes.fromhex(path.read_text().strip()))
        records = req.body.topic_data[0].partition_data[0].records
        ((pos, size),) = split_batches(records)
        header = read_header(records)
        assert size == len(records) and pos == 0
        assert header.compression in (
            1,
            2,
            3,
        )  # gzip from kafka-python, snappy from Java, lz4 from librdkafka
        assert crc_ok(records, header)
