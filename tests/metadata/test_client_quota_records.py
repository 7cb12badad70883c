"""ClientQuotaRecords in the metadata image (cluster mode's client quotas): set by entity and key,
removed key by key (an entity with no key left is gone), shared between images when unchanged."""

from __future__ import annotations

from typing import Any

from kcompat.metadata import records as r
from kcompat.metadata.loader import MetadataLoader
from tests.metadata.test_metadata_loader import batch, feature


def quota(
    entity: dict[str, str | None], key: str, value: float = 0.0, remove: bool = False
) -> tuple[int, int, dict[str, Any]]:
    data = [{"entity_type": t, "entity_name": n} for t, n in entity.items()]
    return (r.CLIENT_QUOTA, 0, {"entity": data, "key": key, "value": value, "remove": remove})


def test_client_quota_records_set_and_remove() -> None:
    alice_default = (("client-id", None), ("user", "alice"))
    loader = MetadataLoader()
    loader.append(
        batch(
            0,
            quota({"user": "alice", "client-id": None}, "producer_byte_rate", 1024.0),
            quota({"client-id": None, "user": "alice"}, "consumer_byte_rate", 2048.0),  # the same entity
            quota({"user": None}, "request_percentage", 50.0),
        )
    )
    image = loader.advance(3)
    assert image is not None
    assert dict(image.client_quotas[alice_default]) == {
        "producer_byte_rate": 1024.0,
        "consumer_byte_rate": 2048.0,
    }
    assert dict(image.client_quotas[(("user", None),)]) == {"request_percentage": 50.0}
    loader.append(
        batch(
            3,
            quota({"user": "alice", "client-id": None}, "producer_byte_rate", remove=True),
            quota({"user": None}, "request_percentage", remove=True),
        )
    )
    image = loader.advance(5)
    assert image is not None
    assert dict(image.client_quotas[alice_default]) == {"consumer_byte_rate": 2048.0}
    assert (("user", None),) not in image.client_quotas
    loader.append(batch(5, feature("group.version", 1)))
    later = loader.advance(6)
    assert later is not None and later.client_quotas is image.client_quotas  # unchanged: shared
