"""The marker sender's rounds (server/cluster/txn_channels.py, Kafka's TransactionMarkerChannelManager),
with a real refused connection: a marker whose leader cannot be reached is retried with the leader
the metadata names next; a fenced marker drops the job; a transaction that left this coordinator
is not pursued. The metadata is a small table the test moves, as an image would."""

from __future__ import annotations

import asyncio
import socket
import uuid
from dataclasses import dataclass

from kcompat.server.cluster.txn_channels import BrokerChannels, TxnMarkerSender
from kcompat.server.delayed_fetch import FetchWaiters
from kcompat.storage.topic_store import TopicInfo
from kcompat.wire.error_codes import ErrorCode as E

NODE = 1


@dataclass
class Endpoint:
    host: str
    port: int


class Image:
    """Leaders per partition of topic "t" (2 partitions); every other broker at a refused port."""

    def __init__(
        self, leaders: dict[int, int], refused_port: int, then: dict[int, int] | None = None
    ) -> None:
        self.leaders = leaders
        self.port = refused_port
        self.then = then  # the leaders of the next image, published as the first remote call is made
        self.asked: list[int] = []

    def topic(self, name: str) -> TopicInfo | None:
        return TopicInfo(name, uuid.UUID(int=1), 2) if name == "t" else None

    def leader_and_epoch(self, t: TopicInfo, partition: int) -> tuple[int, int]:
        return self.leaders[partition], 0

    def broker_endpoint(self, node_id: int, listener: str) -> Endpoint | None:
        self.asked.append(node_id)
        if self.then is not None:
            self.leaders, self.then = {**self.leaders, **self.then}, None
        return Endpoint("127.0.0.1", self.port)


def refused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again: connecting is refused


def sender(image: Image, codes: dict[tuple[str, int], E], written: list[tuple[str, int]]) -> TxnMarkerSender:
    def write_local(topic: str, p: int, pid: int, epoch: int, commit: bool, coordinator_epoch: int) -> E:
        written.append((topic, p))
        return codes.get((topic, p), E.NONE)

    return TxnMarkerSender(BrokerChannels(image, "PLAINTEXT", NODE), write_local=write_local, partitions={},
                           waiters=FetchWaiters())  # fmt: skip


def test_a_marker_to_an_unreachable_leader_is_retried_with_the_next_leader() -> None:
    image = Image({0: NODE, 1: 2}, refused_port(), then={1: NODE})  # t-1 moves here after the failure
    written: list[tuple[str, int]] = []
    s = sender(image, {}, written)
    assert asyncio.run(s.send("tx", 7, 0, True, 0, (("t", 0), ("t", 1)), lambda: True)) is True
    assert image.asked == [2]  # one refused call to broker 2, then t-1 written here
    assert written == [("t", 0), ("t", 1)]  # each once: t-0 is not written again in the retry


def test_a_fenced_marker_drops_the_job_and_a_lost_transaction_is_not_pursued() -> None:
    image = Image({0: NODE, 1: NODE}, refused_port())
    written: list[tuple[str, int]] = []
    fenced = sender(image, {("t", 1): E.INVALID_PRODUCER_EPOCH}, written)
    assert asyncio.run(fenced.send("tx", 7, 0, False, 0, (("t", 0), ("t", 1)), lambda: True)) is False

    written.clear()
    image.leaders[1] = 2  # unreachable for good; the transaction then leaves this coordinator
    mine = iter([True, True, False])
    s = sender(image, {}, written)
    assert asyncio.run(s.send("tx", 7, 0, True, 0, (("t", 0), ("t", 1)), lambda: next(mine))) is False
    assert written == [("t", 0)]
    # A deleted topic has nothing left to mark: done at once.
    assert asyncio.run(s.send("tx", 7, 0, True, 0, (("gone", 0),), lambda: True)) is True


def test_a_connection_the_peer_closed_while_idle_is_replaced_not_failed() -> None:
    """Issue 26: inter-broker calls failed with 'IncompleteReadError 0 bytes read' when the peer
    had closed the idle connection: the next request went into it. The channel now sees the EOF
    and connects again."""
    from kcompat.server.cluster.controller_channel import ControllerChannel
    from kcompat.wire.messages.api_versions import API_VERSIONS
    from kcompat.wire.protocol import encode_response
    from kcompat.wire.types.api_versions import ApiVersionsResponse

    async def scenario() -> tuple[int, int]:
        connections = 0

        async def serve_one_then_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal connections
            connections += 1
            size = int.from_bytes(await reader.readexactly(4), "big")
            frame = await reader.readexactly(size)
            correlation = int.from_bytes(frame[4:8], "big")
            answer = ApiVersionsResponse(error_code=0, api_keys=[], throttle_time_ms=0)
            writer.write(
                b"".join(bytes(c) for c in encode_response(API_VERSIONS.key, 0, correlation, answer))
            )
            await writer.drain()
            writer.close()  # as after connections.max.idle.ms

        server = await asyncio.start_server(serve_one_then_close, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        channel = ControllerChannel([("127.0.0.1", port)], client_id="t", request_timeout_s=5)
        try:
            first = await channel.call(API_VERSIONS.key, 0, {})
            await asyncio.sleep(0.1)  # idle: the peer's close arrives
            second = await channel.call(API_VERSIONS.key, 0, {})
        finally:
            channel.close()
            server.close()
            await server.wait_closed()
        assert first.error_code == second.error_code == 0
        return connections, 2

    connections, calls = asyncio.run(scenario())
    assert connections == calls
