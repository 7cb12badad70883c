"""The records of `__cluster_metadata` as they sit in a RecordBatch v2 record's value.

    value = uvarint frameVersion (1) | uvarint apiKey | uvarint version | body
            (server-common/.../AbstractApiMessageSerde.java; the key is always null)

The bodies are coded by the declarations in kcompat.wire.messages.metadata_records (Kafka 4.3.1's
metadata/src/main/resources/common/metadata/*.json). Keys 6, 13 and 16 were removed from Kafka.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kcompat.wire.codec import MessageCodec
from kcompat.wire.errors import DecodeError
from kcompat.wire.messages import metadata_records as m
from kcompat.wire.primitives import Reader, Writer

FRAME_VERSION = 1

REGISTER_BROKER = 0
UNREGISTER_BROKER = 1
TOPIC = 2
PARTITION = 3
CONFIG = 4
PARTITION_CHANGE = 5
FENCE_BROKER = 7
UNFENCE_BROKER = 8
REMOVE_TOPIC = 9
DELEGATION_TOKEN = 10
USER_SCRAM_CREDENTIAL = 11
FEATURE_LEVEL = 12
CLIENT_QUOTA = 14
PRODUCER_IDS = 15
BROKER_REGISTRATION_CHANGE = 17
ACCESS_CONTROL_ENTRY = 18
REMOVE_ACCESS_CONTROL_ENTRY = 19
NO_OP = 20
ZK_MIGRATION_STATE = 21
REMOVE_USER_SCRAM_CREDENTIAL = 22
BEGIN_TRANSACTION = 23
END_TRANSACTION = 24
ABORT_TRANSACTION = 25
REMOVE_DELEGATION_TOKEN = 26
REGISTER_CONTROLLER = 27
CLEAR_ELR = 28

CODECS: dict[int, MessageCodec] = {
    REGISTER_BROKER: MessageCodec(m.REGISTER_BROKER_RECORD),
    UNREGISTER_BROKER: MessageCodec(m.UNREGISTER_BROKER_RECORD),
    TOPIC: MessageCodec(m.TOPIC_RECORD),
    PARTITION: MessageCodec(m.PARTITION_RECORD),
    CONFIG: MessageCodec(m.CONFIG_RECORD),
    PARTITION_CHANGE: MessageCodec(m.PARTITION_CHANGE_RECORD),
    FENCE_BROKER: MessageCodec(m.FENCE_BROKER_RECORD),
    UNFENCE_BROKER: MessageCodec(m.UNFENCE_BROKER_RECORD),
    REMOVE_TOPIC: MessageCodec(m.REMOVE_TOPIC_RECORD),
    DELEGATION_TOKEN: MessageCodec(m.DELEGATION_TOKEN_RECORD),
    USER_SCRAM_CREDENTIAL: MessageCodec(m.USER_SCRAM_CREDENTIAL_RECORD),
    FEATURE_LEVEL: MessageCodec(m.FEATURE_LEVEL_RECORD),
    CLIENT_QUOTA: MessageCodec(m.CLIENT_QUOTA_RECORD),
    PRODUCER_IDS: MessageCodec(m.PRODUCER_IDS_RECORD),
    BROKER_REGISTRATION_CHANGE: MessageCodec(m.BROKER_REGISTRATION_CHANGE_RECORD),
    ACCESS_CONTROL_ENTRY: MessageCodec(m.ACCESS_CONTROL_ENTRY_RECORD),
    REMOVE_ACCESS_CONTROL_ENTRY: MessageCodec(m.REMOVE_ACCESS_CONTROL_ENTRY_RECORD),
    NO_OP: MessageCodec(m.NO_OP_RECORD),
    ZK_MIGRATION_STATE: MessageCodec(m.ZK_MIGRATION_STATE_RECORD),
    REMOVE_USER_SCRAM_CREDENTIAL: MessageCodec(m.REMOVE_USER_SCRAM_CREDENTIAL_RECORD),
    BEGIN_TRANSACTION: MessageCodec(m.BEGIN_TRANSACTION_RECORD),
    END_TRANSACTION: MessageCodec(m.END_TRANSACTION_RECORD),
    ABORT_TRANSACTION: MessageCodec(m.ABORT_TRANSACTION_RECORD),
    REMOVE_DELEGATION_TOKEN: MessageCodec(m.REMOVE_DELEGATION_TOKEN_RECORD),
    REGISTER_CONTROLLER: MessageCodec(m.REGISTER_CONTROLLER_RECORD),
    CLEAR_ELR: MessageCodec(m.CLEAR_ELR_RECORD),
}


def encode_record(api_key: int, version: int, body: Any) -> bytes:
    """A record value: the frame header, then `body` (the record's struct, or the nested dicts it is
    built from) at `version`."""
    w = Writer()
    w.uvarint(FRAME_VERSION)
    w.uvarint(api_key)
    w.uvarint(version)
    codec = CODECS[api_key]
    codec.write(w, codec.build(body) if isinstance(body, Mapping) else body, version)
    return w.getvalue()


def decode_record(value: bytes | bytearray | memoryview) -> tuple[int, int, Any]:
    """(apiKey, version, body) of one record value; DecodeError for anything malformed or unknown."""
    r = Reader(value)
    frame = r.uvarint()
    if frame != FRAME_VERSION:
        raise DecodeError(f"metadata record frame version {frame}, expected {FRAME_VERSION}", "frameVersion")
    api_key = r.uvarint()
    version = r.uvarint()
    codec = CODECS.get(api_key)
    if codec is None:
        raise DecodeError(f"unknown metadata record type {api_key}", "apiKey")
    if version not in codec.message.versions:
        raise DecodeError(f"{codec.message.name} v{version} is not supported", "version")
    body = codec.decoder(version)(r)
    if r.remaining():
        raise DecodeError(f"{r.remaining()} bytes after {codec.message.name}", codec.message.name)
    return api_key, version, body
