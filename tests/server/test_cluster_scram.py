"""Cluster mode's SCRAM credentials on a broker (no sockets): they are the metadata image's, taken
by the credential source its SASL listeners and DescribeUserScramCredentials read, and a
--add-scram user (a single node's local file) is refused with a line that says where they live."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kcompat.config import BrokerConfig, ConfigError
from kcompat.metadata.loader import MetadataLoader
from kcompat.security.scram import CredentialProvider
from kcompat.server.broker import Broker
from kcompat.server.context import RequestContext
from kcompat.server.handlers.security import alter_user_scram_credentials, describe_user_scram_credentials
from kcompat.storage.scram_credentials import FILE_NAME, ScramCredentialStore, from_password, parse_add_scram
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.alter_user_scram_credentials import ALTER_USER_SCRAM_CREDENTIALS
from kcompat.wire.messages.describe_user_scram_credentials import DESCRIBE_USER_SCRAM_CREDENTIALS
from kcompat.wire.protocol import decode_request
from tests.metadata.test_metadata_loader import batch
from tests.metadata.test_scram_records import SHA512, remove_scram, user_scram
from tests.server.broker_harness import HarnessFactory


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


def test_describe_and_alter_read_the_credential_source(broker_harness: HarnessFactory) -> None:
    """Describe answers from whatever source the broker holds (here a cluster member's image, as
    ScramImage.describe); Alter is the controller's there, so the handler never writes."""
    h = broker_harness()
    loader = MetadataLoader()
    loader.append(batch(0, user_scram("alice", SHA512, "a"), user_scram("alice", 1, "a", iterations=8192)))
    image = loader.advance(2)
    assert image is not None
    provider = CredentialProvider()
    provider.replace(image.scram)
    services = replace(h.broker.services, scram=provider)

    def handle(handler: Any, api: Any, body: dict[str, Any]) -> Any:
        request = decode_request(h.frame(api, 0, body)[4:])
        return h.run(handler(RequestContext(services, None, request), request))

    asked = {"users": [{"name": "alice"}, {"name": "nobody"}, {"name": "twice"}, {"name": "twice"}]}
    r = handle(describe_user_scram_credentials, DESCRIBE_USER_SCRAM_CREDENTIALS, asked)
    got = {
        x.user: (
            x.error_code,
            x.error_message,
            [(c.mechanism, c.iterations) for c in x.credential_infos or []],
        )
        for x in r.results
    }
    assert got == {
        "alice": (0, None, [(1, 8192), (2, 4096)]),
        "nobody": (
            ErrorCode.RESOURCE_NOT_FOUND,
            "Attempt to describe a user credential that does not exist: nobody",
            [],
        ),
        "twice": (
            ErrorCode.DUPLICATE_RESOURCE,
            "Cannot describe SCRAM credentials for the same user twice in a single request: twice",
            [],
        ),
    }
    r = handle(describe_user_scram_credentials, DESCRIBE_USER_SCRAM_CREDENTIALS, {"users": None})
    assert [x.user for x in r.results] == ["alice"]
    upsert = {"name": "bob", "mechanism": 2, "iterations": 4096, "salt": b"s", "salted_password": b"p"}
    r = handle(
        alter_user_scram_credentials, ALTER_USER_SCRAM_CREDENTIALS, {"deletions": [], "upsertions": [upsert]}
    )
    assert [(x.user, x.error_code) for x in r.results] == [("bob", ErrorCode.NOT_CONTROLLER)]
    assert provider.users() == ["alice"]
