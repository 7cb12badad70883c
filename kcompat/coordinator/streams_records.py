"""The keys and values of a streams group's `__consumer_offsets` records (KIP-1071), in Kafka's formats.

    type 17  StreamsGroupMetadataKey                  StreamsGroupMetadataValue v0
    type 19  StreamsGroupMemberMetadataKey            StreamsGroupMemberMetadataValue v0
    type 20  StreamsGroupTargetAssignmentMetadataKey  StreamsGroupTargetAssignmentMetadataValue v0
    type 21  StreamsGroupTargetAssignmentMemberKey    StreamsGroupTargetAssignmentMemberValue v0
    type 22  StreamsGroupCurrentMemberAssignmentKey   StreamsGroupCurrentMemberAssignmentValue v0
    type 23  StreamsGroupTopologyKey                  StreamsGroupTopologyValue v0

records.py encodes and decodes them with the other record types. A value keeps its fields as the
nested mapping the declaration (kcompat.wire.messages.group_records) builds from: these records
are only written and replayed by streams_group_records.py, which reads them by field name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class StreamsGroupMetadataKey:
    group_id: str


@dataclass(frozen=True)
class StreamsGroupMemberMetadataKey:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class StreamsGroupTargetAssignmentMetadataKey:
    group_id: str


@dataclass(frozen=True)
class StreamsGroupTargetAssignmentMemberKey:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class StreamsGroupCurrentMemberAssignmentKey:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class StreamsGroupTopologyKey:
    group_id: str


@dataclass(frozen=True, eq=False)
class _Fields:
    fields: dict[str, Any]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Fields) and type(other) is type(self) and other.fields == self.fields

    __hash__ = None  # type: ignore[assignment]


class StreamsGroupMetadataValue(_Fields):
    pass


class StreamsGroupMemberMetadataValue(_Fields):
    pass


class StreamsGroupTargetAssignmentMetadataValue(_Fields):
    pass


class StreamsGroupTargetAssignmentMemberValue(_Fields):
    pass


class StreamsGroupCurrentMemberAssignmentValue(_Fields):
    pass


class StreamsGroupTopologyValue(_Fields):
    pass


STREAMS_KEYS = (
    (17, StreamsGroupMetadataKey),
    (19, StreamsGroupMemberMetadataKey),
    (20, StreamsGroupTargetAssignmentMetadataKey),
    (21, StreamsGroupTargetAssignmentMemberKey),
    (22, StreamsGroupCurrentMemberAssignmentKey),
    (23, StreamsGroupTopologyKey),
)
STREAMS_VALUES = (
    StreamsGroupMetadataValue,
    StreamsGroupMemberMetadataValue,
    StreamsGroupTargetAssignmentMetadataValue,
    StreamsGroupTargetAssignmentMemberValue,
    StreamsGroupCurrentMemberAssignmentValue,
    StreamsGroupTopologyValue,
)
StreamsRecordKey = (
    StreamsGroupMetadataKey
    | StreamsGroupMemberMetadataKey
    | StreamsGroupTargetAssignmentMetadataKey
    | StreamsGroupTargetAssignmentMemberKey
    | StreamsGroupCurrentMemberAssignmentKey
    | StreamsGroupTopologyKey
)
StreamsRecordValue = (
    StreamsGroupMetadataValue
    | StreamsGroupMemberMetadataValue
    | StreamsGroupTargetAssignmentMetadataValue
    | StreamsGroupTargetAssignmentMemberValue
    | StreamsGroupCurrentMemberAssignmentValue
    | StreamsGroupTopologyValue
)
