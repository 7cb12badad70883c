"""The fetch path alone: a raw-socket client that sends Fetch requests and counts the record
bytes of the answers without decoding a record, so the figure is the broker's, not a client
library's. One connection, one request at a time, like a consumer's fetcher.

Fetch v4 (served by Kafka 4 and kcompat alike), request header v1:

    request:  int32 replica_id=-1 | int32 max_wait_ms | int32 min_bytes | int32 max_bytes
              | int8 isolation_level=0 | [topic string | [int32 partition | int64 fetch_offset
              | int32 partition_max_bytes]]
    response: int32 correlation_id | int32 throttle_time_ms | [topic string | [int32 partition
              | int16 error_code | int64 high_watermark | int64 last_stable_offset
              | [int64 producer_id | int64 first_offset] aborted | bytes records]]
    records:  batches of  int64 base_offset | int32 batch_length | int32 partition_leader_epoch
              | int8 magic | int32 crc | int16 attributes | int32 last_offset_delta | ...
              Kafka cuts the last batch short at the byte limit (KIP-74) and the client fetches it
              again, whole, next time; kcompat sends whole batches only. Only whole batches count,
              so a broker is not credited for bytes that the client throws away.
"""

from __future__ import annotations

import socket
import struct
import time

from benchmarks.confluent_clients import Throughput

_CLIENT_ID = b"kcompat-bench-fetch"
_BATCH_HEAD = struct.Struct(">qi")  # base_offset, batch_length
_LAST_DELTA_AT = 23  # offset of last_offset_delta in a batch


def fetch_request(correlation_id: int, topic: str, offset: int, partition_max: int, max_bytes: int) -> bytes:
    name = topic.encode()
    body = (
        struct.pack(">hhih", 1, 4, correlation_id, len(_CLIENT_ID)) + _CLIENT_ID
        + struct.pack(">iiiibi", -1, 500, 1, max_bytes, 0, 1)
        + struct.pack(">h", len(name)) + name
        + struct.pack(">iiqi", 1, 0, offset, partition_max)
    )  # fmt: skip
    return struct.pack(">i", len(body)) + body


def _recv_into(sock: socket.socket, view: memoryview, n: int) -> None:
    got = 0
    while got < n:
        k = sock.recv_into(view[got:n])
        if not k:
            raise ConnectionError("broker closed the connection")
        got += k


def _parse(buf: memoryview, topic_len: int) -> tuple[int, int, int, int]:
    """(error_code, high_watermark, records_start, records_length) of the one partition answered."""
    at = 4 + 4 + 4 + 2 + topic_len + 4  # correlation, throttle, topic count, topic, partition count
    _, error, hwm, _ = struct.unpack_from(">ihqq", buf, at)
    at += 4 + 2 + 8 + 8
    (aborted,) = struct.unpack_from(">i", buf, at)
    at += 4 + max(aborted, 0) * 16
    (length,) = struct.unpack_from(">i", buf, at)
    return error, hwm, at + 4, max(length, 0)


def _whole_batches(buf: memoryview, start: int, length: int, offset: int) -> tuple[int, int]:
    """(next offset, bytes of whole batches) of the records at buf[start:start+length]."""
    at, end = start, start + length
    while at + 27 <= end:
        base, batch_len = _BATCH_HEAD.unpack_from(buf, at)
        if at + 12 + batch_len > end:
            break
        offset = base + struct.unpack_from(">i", buf, at + _LAST_DELTA_AT)[0] + 1
        at += 12 + batch_len
    return offset, at - start


def read_partition(host: str, port: int, topic: str, end_offset: int, partition_max: int,
                   max_bytes: int = 52428800, passes: int = 1, timeout: float = 120.0) -> Throughput:  # fmt: skip
    """Fetch partition 0 of `topic` from offset 0 to `end_offset`, `passes` times over; bytes are
    those of the whole batches received."""
    buf = bytearray(max_bytes + (1 << 20))
    total = 0
    with socket.create_connection((host, port), timeout=30) as sock:
        t0 = time.perf_counter()
        for _ in range(passes):
            total += _one_pass(sock, topic, end_offset, partition_max, max_bytes, buf, t0, timeout)
        seconds = time.perf_counter() - t0
    return Throughput(end_offset * passes, total, seconds)


def _one_pass(sock: socket.socket, topic: str, end_offset: int, partition_max: int, max_bytes: int,
              buf: bytearray, t0: float, timeout: float) -> int:  # fmt: skip
    view = memoryview(buf)
    offset = total = correlation = 0
    while offset < end_offset:
        correlation += 1
        sock.sendall(fetch_request(correlation, topic, offset, partition_max, max_bytes))
        _recv_into(sock, view, 4)
        (size,) = struct.unpack_from(">i", buf)
        if size > len(buf):
            raise RuntimeError(f"a Fetch response of {size} bytes exceeds max_bytes={max_bytes}")
        _recv_into(sock, view, size)
        error, _, start, length = _parse(view, len(topic.encode()))
        if error:
            raise RuntimeError(f"Fetch of {topic} at {offset}: error code {error}")
        offset, whole = _whole_batches(view, start, length, offset)
        total += whole
        if time.perf_counter() - t0 > timeout:
            raise TimeoutError(f"raw fetch of {topic} reached {offset} of {end_offset} in {timeout} s")
    return total
