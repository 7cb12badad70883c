"""The bounds of one client connection (kcompat.server.network.connection): request size, read-ahead of
pipelined requests, unsent response bytes; and the throttle of a client over its quota (KIP-219)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Limits:
    max_request_bytes: int = 104857600  # socket.request.max.bytes
    max_queued_requests: int = 32  # pipelined requests read ahead of the one being handled...
    max_queued_bytes: int = 4 << 20  # ...holding at most this many bytes (at least one request)
    write_high_water: int = 1 << 20  # stop reading and handling above this many unsent bytes...
    write_low_water: int = 256 << 10  # ...until the queue drains below this
    read_buffer: int = 64 << 10  # frames larger than this are received into a buffer of their own
    # Client quotas: connection id -> seconds its connection serves nothing once its answer is out
    # (kcompat.server.quotas sets them; shared by every connection of the reactor).
    mutes: dict[str, float] = field(default_factory=dict)


async def waited_out(mutes: dict[str, float], connection_id: str) -> bool:
    """Wait out the connection's throttle time, if a quota set one (Kafka mutes the channel)."""
    delay = mutes.pop(connection_id, 0.0)
    if delay > 0:
        await asyncio.sleep(delay)
    return delay > 0
