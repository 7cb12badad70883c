"""Cluster mode's SCRAM credentials on a broker (no sockets): they are the metadata image's, taken
by the credential source its SASL listeners and DescribeUserScramCredentials read, and a
--add-scram user (a single node's local file) is refused with a line that says where they live."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from kcompat.config import BrokerConfig, ConfigError
from kcompat.metadata.loader import MetadataLoader
from kcompat.security.scram import CredentialProvider
from kcompat.server.broker import Broker
from kcompat.storage.scram_credentials import FILE_NAME, ScramCredentialStore, from_password, parse_add_scram
from tests.metadata.test_metadata_loader import batch
from tests.metadata.test_scram_records import SHA512, remove_scram, user_scram


def cluster_broker(tmp_path: Path) -> Broker:
    return Broker(
        BrokerConfig(
            {
                "process.roles": "broker",
                "node.id": "1",
                "controller.quorum.bootstrap.servers": "127.0.0.1:9",
                "controller.listener.names": "CONTROLLER",
                "log.dirs": str(tmp_path / "data"),
            }
        )
    )


def test_the_broker_reads_the_images_credentials(tmp_path: Path) -> None:
    broker = cluster_broker(tmp_path)
    assert isinstance(broker.scram, CredentialProvider) and broker.scram_store is None
    loader = MetadataLoader()
    loader.append(batch(0, user_scram("alice", SHA512, "alice-secret")))
    image = loader.advance(1)
    assert image is not None
    broker.cluster.metadata.set_image(image)  # type: ignore[attr-defined]
    assert broker.scram.users() == ["alice"]
    assert broker.scram.get("alice", "SCRAM-SHA-512") == image.scram["alice"]["SCRAM-SHA-512"]
    loader.append(batch(1, remove_scram("alice", SHA512)))
    image = loader.advance(2)
    assert image is not None
    broker.cluster.metadata.set_image(image)  # type: ignore[attr-defined]
    assert broker.scram.get("alice", "SCRAM-SHA-512") is None and broker.scram.users() == []


def test_add_scram_is_refused_in_cluster_mode(tmp_path: Path) -> None:
    broker = cluster_broker(tmp_path)
    broker.initial_scram_users = [parse_add_scram("SCRAM-SHA-512=[name=alice,password=a]")]
    with pytest.raises(ConfigError, match="in cluster mode SCRAM users live in __cluster_metadata"):
        asyncio.run(broker.start())
    assert not (tmp_path / "data" / FILE_NAME).exists()


def test_a_local_scram_file_left_from_a_single_node_is_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = ScramCredentialStore(tmp_path / "data")
    store.upsert("alice", "SCRAM-SHA-512", from_password("SCRAM-SHA-512", "a"))
    store.save()
    broker = cluster_broker(tmp_path)
    broker.initial_scram_users = [parse_add_scram("SCRAM-SHA-512=[name=bob,password=b]")]
    with caplog.at_level(logging.WARNING, "kcompat.server"), pytest.raises(ConfigError):
        asyncio.run(broker.start())
    lines = [r.getMessage() for r in caplog.records if "is not read in cluster mode" in r.getMessage()]
    assert len(lines) == 1 and "kafka-configs --alter --entity-type users" in lines[0], caplog.text
    assert broker.scram.get("alice", "SCRAM-SHA-512") is None  # the file's users are not logged in
