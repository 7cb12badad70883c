"""The cold-start probe: connect and ask for Metadata until a broker answers.

Metadata v4 (every broker since Kafka 1.0 and Kafka 4 both serve it), request header v1:

    int32 size | int16 api_key=3 | int16 api_version=4 | int32 correlation_id
    | int16 client_id length | client_id | int32 topics=-1 (null: all) | int8 allow_auto_topic_creation=0

An answer is a whole response frame (response header v0: int32 size | int32 correlation_id | ...)
carrying our correlation id.
"""

from __future__ import annotations

import socket
import struct
import time

_CLIENT_ID = b"kcompat-bench"
_CORRELATION_ID = 0x6265


def metadata_request() -> bytes:
    body = (
        struct.pack(">hhih", 3, 4, _CORRELATION_ID, len(_CLIENT_ID)) + _CLIENT_ID + struct.pack(">ib", -1, 0)
    )
    return struct.pack(">i", len(body)) + body


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return bytes(buf)


def metadata_answered(host: str, port: int, timeout: float = 2.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(metadata_request())
            (size,) = struct.unpack(">i", _recv_exact(sock, 4))
            frame = _recv_exact(sock, size)
            return size >= 4 and struct.unpack_from(">i", frame)[0] == _CORRELATION_ID
    except (OSError, struct.error):
        return False


def wait_for_metadata(host: str, port: int, started: float, timeout: float, alive: object) -> float:
    """Seconds from `started` (a perf_counter time) to the first answered Metadata request.

    `alive()` says whether the broker process still runs; polls every 5 ms.
    """
    deadline = started + timeout
    while True:
        if metadata_answered(host, port):
            return time.perf_counter() - started
        if not alive():  # type: ignore[operator]
            raise RuntimeError("the broker exited before answering Metadata")
        if time.perf_counter() > deadline:
            raise TimeoutError(f"no Metadata answer from {host}:{port} within {timeout:.0f} s")
        time.sleep(0.005)
