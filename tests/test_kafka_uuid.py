"""kcompat.kafka_uuid: ids as Kafka's Uuid.randomUuid hands them out."""

from __future__ import annotations

import base64
import uuid

import pytest

from kcompat import kafka_uuid
from kcompat.config import new_cluster_id


def test_form_is_22_characters_of_url_safe_base64() -> None:
    for _ in range(200):
        text = kafka_uuid.random_uuid_base64()
        assert len(text) == 22
        assert uuid.UUID(bytes=base64.urlsafe_b64decode(text + "==")) != uuid.UUID(int=0)


def test_never_reserved_nor_starting_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    # 0xf8 as the first byte encodes as '-' in URL-safe base64; zeros and ...01 are reserved.
    drawn = iter(
        [uuid.UUID(int=0), uuid.UUID(int=1), uuid.UUID(bytes=b"\xf8" + bytes(15)), uuid.UUID(int=7 << 64)]
    )
    monkeypatch.setattr(kafka_uuid.uuid, "uuid4", lambda: next(drawn))
    assert kafka_uuid.random_uuid() == uuid.UUID(int=7 << 64)
    assert kafka_uuid.to_base64(uuid.UUID(bytes=b"\xf8" + bytes(15))).startswith("-")


def test_cluster_ids_follow_the_rule() -> None:
    assert not any(new_cluster_id().startswith("-") for _ in range(500))
