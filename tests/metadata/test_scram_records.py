"""UserScramCredentialRecords in the metadata image (cluster mode's SCRAM users, written by the
controller): upserted per user and mechanism, dropped by RemoveUserScramCredentialRecord, shared
between images when unchanged, and gone after a snapshot that does not hold them; the broker's
CredentialProvider takes the image's map and a real SCRAM exchange logs in against it."""

from __future__ import annotations

import hashlib
from typing import Any

from scramp import ScramClient

from kcompat.metadata import records as r
from kcompat.metadata.loader import MetadataLoader
from kcompat.security.scram import CredentialProvider, ScramCredential, derive
from kcompat.server.auth.sasl import SaslAuthenticator
from kcompat.wire.control_records import ControlType, control_key
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.records import Record, build_batch
from tests.metadata.test_metadata_loader import batch, feature
from tests.server.test_sasl import authenticate, handshake, security


def auth(provider: CredentialProvider) -> SaslAuthenticator:
    return SaslAuthenticator(security(), provider.get)


SHA256, SHA512 = 1, 2


def salted(password: str, salt: bytes, iterations: int, hash_name: str = "sha512") -> bytes:
    return hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)


def user_scram(
    name: str, mechanism: int, password: str, iterations: int = 4096
) -> tuple[int, int, dict[str, Any]]:
    """The record Kafka's ScramControlManager writes: salt, StoredKey, ServerKey, iterations."""
    mech = {SHA256: "SCRAM-SHA-256", SHA512: "SCRAM-SHA-512"}.get(mechanism, "SCRAM-SHA-512")
    salt = f"salt-of-{name}".encode()
    c = derive(
        mech,
        salted(password, salt, iterations, "sha256" if mechanism == SHA256 else "sha512"),
        salt,
        iterations,
    )
    body = {"name": name, "mechanism": mechanism, "salt": c.salt, "stored_key": c.stored_key,
            "server_key": c.server_key, "iterations": iterations}  # fmt: skip
    return (r.USER_SCRAM_CREDENTIAL, 0, body)


def remove_scram(name: str, mechanism: int) -> tuple[int, int, dict[str, Any]]:
    return (r.REMOVE_USER_SCRAM_CREDENTIAL, 0, {"name": name, "mechanism": mechanism})


def test_scram_records_upsert_replace_and_remove() -> None:
    loader = MetadataLoader()
    loader.append(
        batch(
            0,
            user_scram("alice", SHA512, "one"),
            user_scram("alice", SHA256, "one"),
            user_scram("bob", SHA512, "bob-secret"),
            user_scram("alice", SHA512, "two", iterations=8192),  # a new password replaces the first
            user_scram("carol", 9, "x"),  # a mechanism this broker does not know: skipped
        )
    )
    image = loader.advance(5)
    assert image is not None
    assert sorted(image.scram) == ["alice", "bob"]
    assert sorted(image.scram["alice"]) == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    alice512 = image.scram["alice"]["SCRAM-SHA-512"]
    assert alice512.iterations == 8192
    assert alice512 == derive("SCRAM-SHA-512", salted("two", b"salt-of-alice", 8192), b"salt-of-alice", 8192)

    loader.append(
        batch(5, remove_scram("alice", SHA512), remove_scram("bob", SHA512), remove_scram("nobody", 1))
    )
    image = loader.advance(8)
    assert image is not None
    assert list(image.scram) == ["alice"] and list(image.scram["alice"]) == [
        "SCRAM-SHA-256"
    ]  # bob had no other
    loader.append(batch(8, feature("group.version", 1)))
    later = loader.advance(9)
    assert later is not None and later.scram is image.scram  # untouched: shared with the previous image


def test_a_snapshot_without_a_user_drops_it() -> None:
    loader = MetadataLoader()
    loader.append(batch(0, user_scram("alice", SHA512, "a"), user_scram("bob", SHA512, "b")))
    assert loader.advance(2) is not None
    header = build_batch([Record(0, 0, control_key(ControlType.SNAPSHOT_HEADER), b"\x00" * 10)],
                         base_offset=0, control=True, partition_leader_epoch=3)  # fmt: skip
    image = loader.load_snapshot(
        header + batch(1, user_scram("bob", SHA512, "b2"), epoch=3), end_offset=50, epoch=3
    )
    assert list(image.scram) == ["bob"]  # Kafka's ScramDelta.finishSnapshot: alice was removed
    assert image.scram["bob"]["SCRAM-SHA-512"] == derive(
        "SCRAM-SHA-512", salted("b2", b"salt-of-bob", 4096), b"salt-of-bob", 4096
    )


def login(provider: CredentialProvider, user: str, password: str) -> bool:
    """A real SCRAM-SHA-512 exchange (scramp's client) with the SASL authenticator a listener gets."""
    a = auth(provider)
    handshake(a, "SCRAM-SHA-512")
    client = ScramClient(["SCRAM-SHA-512"], user, password)
    _, body = authenticate(a, client.get_client_first().encode())
    if body.error_code == 0:
        client.set_server_first(body.auth_bytes.decode())
        _, body = authenticate(a, client.get_client_final().encode())
    if body.error_code != 0:
        assert body.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        return False
    client.set_server_final(body.auth_bytes.decode())  # the broker proved it holds the ServerKey
    return a.principal == f"User:{user}"


def test_the_credential_provider_takes_each_image() -> None:
    loader = MetadataLoader()
    provider = CredentialProvider()
    assert provider.get("alice", "SCRAM-SHA-512") is None and provider.users() == []
    loader.append(batch(0, user_scram("alice", SHA512, "alice-secret")))
    image = loader.advance(1)
    assert image is not None
    provider.replace(image.scram)
    assert provider.users() == ["alice"]
    assert isinstance(provider.get("alice", "SCRAM-SHA-512"), ScramCredential)
    assert provider.mechanisms_of("alice") == dict(image.scram["alice"])
    assert login(provider, "alice", "alice-secret")
    assert not login(provider, "alice", "wrong")
    loader.append(batch(1, remove_scram("alice", SHA512)))
    image = loader.advance(2)
    assert image is not None
    provider.replace(image.scram)
    assert provider.users() == [] and not login(provider, "alice", "alice-secret")
