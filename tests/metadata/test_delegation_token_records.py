"""DelegationTokenRecords in the metadata image (cluster mode's delegation tokens, written by the
controller): added and updated by token id, dropped by RemoveDelegationTokenRecord, shared between
images when unchanged; the broker's token manager takes them with their SCRAM credentials."""

from __future__ import annotations

from typing import Any

from kcompat.config import BrokerConfig
from kcompat.metadata import records as r
from kcompat.metadata.loader import MetadataLoader
from kcompat.security.delegation_tokens import TokenInformation, create_hmac
from kcompat.server.auth.delegation_tokens import DelegationTokenManager
from tests.metadata.test_metadata_loader import batch, feature


def token(token_id: str, expiry: int, renewers: tuple[str, ...] = ()) -> tuple[int, int, dict[str, Any]]:
    body = {
        "owner": "User:alice",
        "requester": "User:admin",
        "renewers": list(renewers),
        "issue_timestamp": 1000,
        "max_timestamp": 10**13,
        "expiration_timestamp": expiry,
        "token_id": token_id,
    }
    return (r.DELEGATION_TOKEN, 0, body)


def test_delegation_token_records_add_renew_and_remove() -> None:
    loader = MetadataLoader()
    loader.append(
        batch(0, token("t1", 5000, ("User:bob",)), token("t2", 6000), token("t1", 7000, ("User:bob",)))
    )
    image = loader.advance(3)
    assert image is not None
    assert image.delegation_tokens["t1"] == TokenInformation(
        "t1", "User:alice", "User:admin", ("User:bob",), 1000, 10**13, 7000
    )  # the renewal (a second record for the id) replaced the first
    loader.append(batch(3, (r.REMOVE_DELEGATION_TOKEN, 0, {"token_id": "t2"})))
    image = loader.advance(4)
    assert image is not None and list(image.delegation_tokens) == ["t1"]
    loader.append(batch(4, feature("group.version", 1)))
    later = loader.advance(5)
    assert later is not None and later.delegation_tokens is image.delegation_tokens  # shared

    manager = DelegationTokenManager(
        BrokerConfig({"delegation.token.secret.key": "k", "log.dirs": "/nonexistent"}), None, lambda: 2.0
    )
    manager.replace(image.delegation_tokens)
    assert not manager.sweeps  # the controller sweeps in a cluster
    found = manager.credential("t1", "SCRAM-SHA-512")
    assert found is not None and found.owner == "User:alice" and found.expiry_ms == 7000
    assert manager.renew("User:bob", create_hmac("t1", "k"), -1)[0] == 0  # found by its HMAC
    manager.replace({})
    assert manager.credential("t1", "SCRAM-SHA-512") is None and manager.tokens() == []
