"""Random ids as Kafka's Uuid.randomUuid makes them: cluster, directory and topic ids.

Kafka prints a Uuid as 22 characters of URL-safe base64 without padding. It never hands out a
reserved value (all zeros means "no id"; ...01 is the metadata topic's id), nor one whose text
starts with '-', which a command line would take for an option (`kafka-storage format -t -Xy...`).
"""

from __future__ import annotations

import base64
import uuid

ZERO_UUID = uuid.UUID(int=0)  # Kafka's Uuid.ZERO_UUID: "no id" on the wire
_RESERVED = frozenset({ZERO_UUID, uuid.UUID(int=1)})


def to_base64(u: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode("ascii")


def from_base64(text: str) -> uuid.UUID:
    """A Uuid from its 22-character text; ValueError when it is not one."""
    if len(text) != 22:
        raise ValueError(f"not a Kafka Uuid: {text!r}")
    try:
        return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))
    except (ValueError, TypeError) as e:
        raise ValueError(f"not a Kafka Uuid: {text!r}") from e


def random_uuid() -> uuid.UUID:
    while True:
        u = uuid.uuid4()
        if u not in _RESERVED and not to_base64(u).startswith("-"):
            return u


def random_uuid_base64() -> str:
    return to_base64(random_uuid())
