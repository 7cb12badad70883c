"""Socket buffer settings of client connections: Kafka's send-buffer default, an autotuned receive buffer."""

from __future__ import annotations

import asyncio

from kcompat.config import BrokerConfig
from kcompat.server.serve import reactor_for


async def _noop(frame: memoryview, client: object) -> None:
    return None


def _buffers(props: dict[str, str]) -> tuple[int, int]:
    async def build() -> tuple[int, int]:
        reactor = reactor_for(BrokerConfig(props), _noop)
        return reactor._send_buffer, reactor._receive_buffer

    return asyncio.run(build())


def test_defaults_pin_the_send_buffer_as_kafka_does_and_leave_receive_to_the_kernel() -> None:
    assert _buffers({}) == (102400, -1)


def test_explicit_settings_are_honoured() -> None:
    assert _buffers({"socket.send.buffer.bytes": "-1", "socket.receive.buffer.bytes": "65536"}) == (-1, 65536)
