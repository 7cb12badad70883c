"""Feature levels: what a registration claims, why the controller would refuse it, and what
ApiVersions reports in cluster mode (the metadata image's levels at its offset)."""

from __future__ import annotations

import logging
import struct
from typing import Any

import pytest

from kcompat.config import BrokerConfig
from kcompat.metadata import records as r
from kcompat.metadata.features import CLUSTER_SUPPORTED, Features, refusals
from kcompat.metadata.loader import MetadataLoader
from kcompat.server.cluster.kraft_broker import KRaftBroker
from kcompat.server.cluster.kraft_metadata import KRaftMetadata
from kcompat.server.log_throttle import LogThrottle
from kcompat.wire.control_records import ControlType, control_key
from kcompat.wire.records import Record, build_batch


def feature(name: str, level: int) -> Record:
    return Record(0, 0, None, r.encode_record(r.FEATURE_LEVEL, 0, {"name": name, "feature_level": level}))


def batch(base: int, records: list[Record], *, control: bool = False) -> bytes:
    recs = [Record(base + i, 0, rec.key, rec.value) for i, rec in enumerate(records)]
    return build_batch(recs, base_offset=base, partition_leader_epoch=3, control=control)


def kraft_version(level: int) -> Record:
    # KRaftVersionRecord as Kafka writes it: Version 0, KRaftVersion, no tagged fields.
    return Record(0, 0, control_key(ControlType.KRAFT_VERSION), struct.pack(">hhB", 0, level, 0))


DEFAULT_4_3 = {  # kafka-storage format's levels for 4.3
    "metadata.version": 30, "group.version": 1, "transaction.version": 2,
    "eligible.leader.replicas.version": 1, "share.version": 1, "streams.version": 1,
}  # fmt: skip


def image_with(levels: dict[str, int], kraft: int) -> Any:
    loader = MetadataLoader()
    data = batch(0, [kraft_version(kraft)], control=True) + batch(
        1, [feature(n, v) for n, v in levels.items()]
    )
    loader.append(data)
    image = loader.advance(1 + len(levels))
    assert image is not None
    return image


def test_registration_claims_every_4_3_default_level() -> None:
    assert CLUSTER_SUPPORTED["share.version"] == (0, 1)
    assert CLUSTER_SUPPORTED["eligible.leader.replicas.version"] == (0, 1)
    assert CLUSTER_SUPPORTED["streams.version"] == (0, 1)
    assert refusals(DEFAULT_4_3, CLUSTER_SUPPORTED) == []


def test_a_refused_feature_is_named_in_one_line() -> None:
    got = refusals({**DEFAULT_4_3, "streams.version": 2}, CLUSTER_SUPPORTED)
    assert [f.line() for f in got] == [
        "the controllers finalized streams.version=2; this kcompat supports 0-1; format with "
        "--feature streams.version=1 or run kafka-features.sh downgrade --feature streams.version=1"
    ]
    # A feature the broker does not name counts as 0-0; metadata.version unset counts as 1.
    assert [
        (f.name, f.finalized, f.supported) for f in refusals({"future.version": 2}, CLUSTER_SUPPORTED)
    ] == [
        ("metadata.version", 1, (7, 30)),
        ("future.version", 2, (0, 0)),
    ]


def test_kraft_version_control_record_and_levels_reach_the_image() -> None:
    image = image_with(DEFAULT_4_3, kraft=1)
    assert image.kraft_version == 1 and dict(image.features) == DEFAULT_4_3
    assert image.offset == len(DEFAULT_4_3)


def test_cluster_api_versions_features_come_from_the_image() -> None:
    """Issue 26 fault 3: the levels and epoch are the image's, never the local configuration."""
    md = KRaftMetadata(BrokerConfig({"node.id": "2", "process.roles": "broker"}))
    md.set_image(image_with(DEFAULT_4_3, kraft=1))
    f = md.features()
    assert f.epoch == md.image.offset == 6
    assert f.finalized_levels() == {**DEFAULT_4_3, "kraft.version": 1}
    md.set_image(image_with({**DEFAULT_4_3, "share.version": 0}, kraft=0))
    assert "share.version" not in md.features().finalized_levels()
    assert "kraft.version" not in md.features().finalized_levels()


@pytest.mark.parametrize(("version", "names"), [(3, ["metadata.version"]), (4, list(CLUSTER_SUPPORTED))])
def test_v3_leaves_out_features_with_minimum_zero(version: int, names: list[str]) -> None:
    assert list(Features(CLUSTER_SUPPORTED).supported_for(version)) == names


def test_refused_registration_log_names_the_feature(caplog: pytest.LogCaptureFixture) -> None:
    broker = KRaftBroker(node_id=7, bootstrap=[("127.0.0.1", 1)])
    with caplog.at_level(logging.ERROR, logger="kcompat.cluster"):
        broker._refused_for_features()  # no image yet: no level guessed
    assert "not yet in the metadata fetched here" in caplog.records[0].getMessage()
    caplog.clear()
    broker._throttle = LogThrottle(logging.getLogger("kcompat.cluster"), 10.0)
    broker.loader.image = image_with({**DEFAULT_4_3, "streams.version": 2}, kraft=1)
    with caplog.at_level(logging.ERROR, logger="kcompat.cluster"):
        broker._refused_for_features()
    [line] = [rec.getMessage() for rec in caplog.records]
    assert line.startswith("broker 7 registration refused (UNSUPPORTED_VERSION): the controllers finalized ")
    assert "streams.version=2; this kcompat supports 0-1; format with --feature streams.version=1" in line
