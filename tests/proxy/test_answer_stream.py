"""Large Fetch answers go through the proxy as their bytes arrive: a 50 MB answer is relayed while
the proxy holds a few hundred KiB of it, and KIP-951 NodeEndpoints are rewritten in the same
number of bytes (a shorter endpoint padded with unknown tagged fields the codec skips)."""

from __future__ import annotations

import asyncio
import random
import struct
import tracemalloc
from typing import Any

import pytest

from kcompat.proxy.answer_stream import AnswerStream, endpoints_fit, fit, open_stream, padding
from kcompat.proxy.connection import ClientConnection
from kcompat.proxy.node_map import NodeMap
from kcompat.proxy.shared import Shared
from kcompat.wire.primitives import encode_uvarint
from kcompat.wire.protocol import decode_response, encode_request, encode_response, response_codec
from tests.proxy.stream_rig import close_rig
from tests.proxy.test_skim import RECORDS, TOPIC_ID, fetch_body

_SIZE = struct.Struct(">i")
UPSTREAM = {1: ("broker-one.upstream.example", 9092), 2: ("127.0.0.1", 9092)}


def frame_of(version: int, body: dict[str, Any], correlation: int = 7) -> bytes:
    chunks = encode_response(1, version, correlation, response_codec(1).build(body))
    return b"".join(bytes(c) for c in chunks)


def relay(version: int, frame: bytes, nodes: NodeMap, seed: int = 0) -> tuple[bytes, AnswerStream]:
    """The frame (size prefix included) through an AnswerStream, fed in random pieces."""
    out: list[bytes] = []
    stream = AnswerStream(1, version, 7, len(frame) - 4, out.extend, nodes.endpoint, nodes.learn)
    rng, pos = random.Random(seed), 4
    while pos < len(frame):
        step = rng.choice((1, 2, 3, 7, 50, 4096))
        stream.feed(memoryview(frame)[pos : pos + step])
        pos += step
    stream.done()
    return b"".join(out), stream


def node_map(host: str = "127.0.0.1") -> NodeMap:
    nodes = NodeMap(host, 30000, 100, lambda _: None)
    for node_id, (h, p) in UPSTREAM.items():
        nodes.learn(node_id, h, p)
    return nodes


@pytest.mark.parametrize("version", [16, 17, 18])
@pytest.mark.parametrize("node", [1, 2])
def test_node_endpoints_are_rewritten_in_the_same_bytes(version: int, node: int) -> None:
    host, port = UPSTREAM[node]
    frame = frame_of(version, fetch_body([{"node_id": node, "host": host, "port": port, "rack": "r"}]))
    out, stream = relay(version, frame, node_map())
    assert len(out) == len(frame) and out[:4] == frame[:4]  # the size prefix went out unchanged
    correlation, body = decode_response(1, version, out[4:])
    assert correlation == 7 and not stream.dropped
    [endpoint] = body.node_endpoints
    assert (endpoint.node_id, endpoint.host, endpoint.port, endpoint.rack) == (
        node,
        "127.0.0.1",
        30000 + node,
        "r",
    )
    assert body.responses[0].partitions[0].records == RECORDS  # the record set passed as it came
    assert out[4 : out.index(RECORDS) + len(RECORDS)] == frame[4 : frame.index(RECORDS) + len(RECORDS)]


def test_an_answer_without_node_endpoints_passes_byte_for_byte() -> None:
    frame = frame_of(17, fetch_body([]))
    assert relay(17, frame, node_map())[0] == frame


@pytest.mark.parametrize("version", [4, 11, 12, 15])
def test_answers_before_kip_951_stream_byte_for_byte_whatever_the_endpoints(version: int) -> None:
    frame = frame_of(version, fetch_body([]))
    out: list[bytes] = []
    stream = open_stream(
        1, version, 7, len(frame) - 4, out.extend, node_map("a-much-longer-proxy-host.example")
    )
    assert stream is not None
    stream.feed(memoryview(frame)[4:])
    stream.done()
    assert b"".join(out) == frame


def test_a_node_whose_endpoint_does_not_fit_has_its_node_endpoints_dropped() -> None:
    nodes = node_map("a-much-longer-proxy-host-name.example.com")
    frame = frame_of(17, fetch_body([{"node_id": 2, "host": "127.0.0.1", "port": 9092, "rack": None}]))
    out, stream = relay(17, frame, nodes)
    assert stream.dropped and len(out) == len(frame)
    _, body = decode_response(1, 17, out[4:])
    assert body.node_endpoints == []  # the client falls back to a metadata refresh
    assert not endpoints_fit({2: UPSTREAM[2]}, nodes.endpoint)  # so the proxy holds such answers whole


def test_padding_takes_every_size_but_one() -> None:
    assert padding(1) is None and padding(0) == []
    for spare in range(2, 600):
        pads = padding(spare)
        assert pads is not None and sum(2 + len(data) for _, data in pads) == spare
    assert fit(b"\x01\x00\x02\x01\x02", b"\x01\x00\x01\x01") is None  # one byte short: no field fits


def test_another_correlation_id_is_refused() -> None:
    frame = frame_of(17, fetch_body([]), correlation=8)
    with pytest.raises(Exception, match="correlation"):
        relay(17, frame, node_map())


# -- a 50 MB answer through a real proxy connection ---------------------------------------------

BIG = 50 << 20
CHUNK = bytes(range(256)) * 4096  # 1 MiB of "records"


async def _upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    size = _SIZE.unpack(await reader.readexactly(4))[0]
    request = await reader.readexactly(size)
    correlation = _SIZE.unpack_from(request, 4)[0]
    # a Fetch v17 answer with one partition of BIG bytes of records, built around a marker
    marker = b"R" * 16
    body = {"responses": [{"topic_id": TOPIC_ID, "partitions": [{"partition_index": 0, "records": marker}]}]}
    frame = frame_of(17, body, correlation)
    at = frame.index(marker)
    body_head, tail = frame[4 : at - 1] + encode_uvarint(BIG + 1), frame[at + len(marker) :]
    writer.write(_SIZE.pack(len(body_head) + BIG + len(tail)) + body_head)
    for _ in range(BIG // len(CHUNK)):
        writer.write(CHUNK)
        await writer.drain()
    writer.write(tail)
    await writer.drain()
    await reader.read()
    writer.close()


async def _through_proxy() -> tuple[int, int, bytes]:
    upstream = await asyncio.start_server(_upstream, "127.0.0.1", 0)
    up_port = upstream.sockets[0].getsockname()[1]
    nodes = node_map()
    shared = Shared(nodes, [("127.0.0.1", up_port)], 100 << 20, 256 << 10, 5.0)
    loop = asyncio.get_running_loop()
    proxy = await loop.create_server(lambda: ClientConnection(shared, None), "127.0.0.1", 0)
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.sockets[0].getsockname()[1])
    request = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": BIG, "topics": []}
    writer.write(encode_request(1, 17, 5, request))
    size = _SIZE.unpack(await reader.readexactly(4))[0]
    got, last = 0, b""
    tracemalloc.reset_peak()
    while got < size:
        piece = await reader.read(min(64 << 10, size - got))
        got += len(piece)
        last = (last + piece)[-8:]
        await asyncio.sleep(0)  # a client that reads no faster than it must
    _, peak = tracemalloc.get_traced_memory()
    await close_rig(writer, shared, proxy, upstream)
    return size, peak, last


def test_a_50_mb_fetch_answer_is_relayed_while_the_proxy_holds_little_of_it() -> None:
    tracemalloc.start()
    try:
        size, peak, last = asyncio.run(_through_proxy())
    finally:
        tracemalloc.stop()
    assert size > BIG and last.endswith(b"\x00\x00\x00")
    assert peak < 8 << 20, f"{peak >> 10} KiB held while relaying a {size >> 20} MiB answer"


# -- an answer the proxy gives itself waits behind a streaming one -------------------------------


async def _slow_upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    size = _SIZE.unpack(await reader.readexactly(4))[0]
    correlation = _SIZE.unpack_from(await reader.readexactly(size), 4)[0]
    marker = b"R" * 16
    body = {"responses": [{"topic_id": TOPIC_ID, "partitions": [{"partition_index": 0, "records": marker}]}]}
    frame = frame_of(17, body, correlation)
    at = frame.index(marker)
    head, tail = frame[4 : at - 1] + encode_uvarint(4 * len(CHUNK) + 1), frame[at + len(marker) :]
    writer.write(_SIZE.pack(len(head) + 4 * len(CHUNK) + len(tail)) + head)
    for _ in range(4):
        writer.write(CHUNK)
        await writer.drain()
        await asyncio.sleep(0.05)  # the client's next request is answered by the proxy meanwhile
    writer.write(tail)
    await writer.drain()
    await reader.read()
    writer.close()


async def _fetch_then_api_versions() -> tuple[bytes, int]:
    upstream = await asyncio.start_server(_slow_upstream, "127.0.0.1", 0)
    shared = Shared(
        node_map(), [("127.0.0.1", upstream.sockets[0].getsockname()[1])], 100 << 20, 256 << 10, 5.0
    )
    proxy = await asyncio.get_running_loop().create_server(
        lambda: ClientConnection(shared, None), "127.0.0.1", 0
    )
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.sockets[0].getsockname()[1])
    request = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": BIG, "topics": []}
    writer.write(encode_request(1, 17, 5, request))
    size = _SIZE.unpack(await reader.readexactly(4))[0]
    first = await reader.readexactly(4)  # the Fetch answer has begun: now an ApiVersions v5
    too_new = struct.pack(">hhi", 18, 5, 9) + b"\x00\x00\x00\x00"  # no client id, no tags, no body
    writer.write(_SIZE.pack(len(too_new)) + too_new)
    fetch = first + await reader.readexactly(size - 4)
    _, answer = _SIZE.unpack(await reader.readexactly(4))[0], await reader.readexactly(4)
    await close_rig(writer, shared, proxy, upstream)
    return fetch, _SIZE.unpack(answer)[0]


def test_an_answer_the_proxy_gives_waits_for_the_streaming_answer_before_it() -> None:
    fetch, correlation = asyncio.run(_fetch_then_api_versions())
    assert correlation == 9  # the proxy's own answer to ApiVersions v5 came after the Fetch answer
    _, body = decode_response(1, 17, fetch)  # whole, nothing of another answer in it
    assert body.responses[0].partitions[0].records == CHUNK * 4
