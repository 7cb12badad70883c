"""ControllerChannel: one client connection from this broker to the KRaft controllers (Kafka's
NodeToControllerChannelManager, reduced to what a broker sends: one request at a time).

It connects to `controller.quorum.bootstrap.servers` in turn, or to the node a caller names after
a NOT_CONTROLLER or a Raft answer pointing at the leader. Any failure (refused, reset, timeout,
an answer that does not decode) closes the connection and raises ControllerUnavailable; the
caller's state machine decides when to try again.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from kcompat.server.cluster.peer_errors import peer_failure
from kcompat.wire.errors import DecodeError
from kcompat.wire.protocol import decode_response, encode_request

_SIZE = struct.Struct(">i")
MAX_RESPONSE_BYTES = 64 << 20


class ControllerUnavailable(Exception):
    pass


def parse_bootstrap(servers: list[str]) -> list[tuple[str, int]]:
    """host:port entries (controller.quorum.bootstrap.servers); ValueError names a bad one."""
    out = []
    for entry in servers:
        host, sep, port = entry.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"controller.quorum.bootstrap.servers entry {entry!r} is not host:port")
        out.append((host.strip("[]"), int(port)))
    return out


class ControllerChannel:
    def __init__(
        self, bootstrap: list[tuple[str, int]], *, client_id: str, request_timeout_s: float = 10.0
    ) -> None:
        if not bootstrap:
            raise ValueError("no controller to connect to")
        self.bootstrap = list(bootstrap)
        self.client_id = client_id
        self.request_timeout_s = request_timeout_s
        self.target: tuple[str, int] = self.bootstrap[0]
        self._next_bootstrap = 1
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation = 0

    def redirect(self, host: str, port: int) -> None:
        """Talk to host:port from the next request on (the leader a controller pointed at)."""
        if (host, port) != self.target:
            self.close()
            self.target = (host, port)

    def rotate(self) -> None:
        """Move to the next bootstrap server (after NOT_CONTROLLER or a failure)."""
        self.close()
        self.target = self.bootstrap[self._next_bootstrap % len(self.bootstrap)]
        self._next_bootstrap += 1

    def rediscover(self, leader: tuple[str, int] | None) -> None:
        """After NOT_CONTROLLER or a failure: the active controller the metadata names, if it is
        another one than this channel's, else the next bootstrap server."""
        if leader is not None and leader != self.target:
            self.redirect(*leader)
        else:
            self.rotate()

    async def call(self, api_key: int, version: int, body: Any, timeout_s: float | None = None) -> Any:
        # asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow a cancellation that
        # arrives as the call completes, and a task cancelled at shutdown would then go on.
        timeout = timeout_s or self.request_timeout_s
        try:
            async with asyncio.timeout(timeout):
                return await self._call(api_key, version, body)
        except asyncio.CancelledError:
            self.close()  # a request may be in flight: its late answer must not meet the next request
            raise
        except (OSError, EOFError, TimeoutError, asyncio.IncompleteReadError, DecodeError, ValueError) as e:
            self.close()
            raise ControllerUnavailable(peer_failure(*self.target, e, timeout)) from None

    async def _call(self, api_key: int, version: int, body: Any) -> Any:
        if self._writer is not None and (
            self._writer.is_closing() or self._reader is None or self._reader.at_eof()
        ):
            # The peer closed it while it was idle (its connections.max.idle.ms, a restart): a new
            # connection, rather than a request written into a closed one and failed with EOF.
            self.close()
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(*self.target)
        assert self._reader is not None
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        self._writer.write(encode_request(api_key, version, self._correlation, body, self.client_id))
        await self._writer.drain()
        (size,) = _SIZE.unpack(await self._reader.readexactly(4))
        if not 4 <= size <= MAX_RESPONSE_BYTES:
            raise ValueError(f"a response size of {size} bytes")
        correlation, response = decode_response(api_key, version, await self._reader.readexactly(size))
        if correlation != self._correlation:
            raise ValueError(f"correlation id {correlation} where {self._correlation} was due")
        return response

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None
