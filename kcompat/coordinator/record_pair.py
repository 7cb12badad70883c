"""What the start path needs of the group coordinator's records, apart from their 26 classes
(records.py, loaded by the first group request or the replay of __consumer_offsets): the stored
pair, and the partition of `__consumer_offsets` a group's records go to."""

from __future__ import annotations

from typing import NamedTuple


class Record(NamedTuple):
    """One `__consumer_offsets` record: key bytes and value bytes, or None for a tombstone."""

    key: bytes
    value: bytes | None


def offsets_partition(group_id: str, num_partitions: int) -> int:
    """Kafka's `__consumer_offsets` partition for a group: abs(Java String.hashCode) mod n."""
    h = 0
    for unit in _utf16_units(group_id):
        h = (31 * h + unit) & 0xFFFFFFFF
    if h >= 0x80000000:
        h -= 0x100000000
    # Kafka's Utils.abs maps Integer.MIN_VALUE to 0 rather than overflowing.
    return (0 if h == -0x80000000 else abs(h)) % num_partitions


def _utf16_units(s: str) -> list[int]:
    b = s.encode("utf-16-be", "surrogatepass")
    return [(b[i] << 8) | b[i + 1] for i in range(0, len(b), 2)]
