"""Large requests go upstream as their bytes arrive: a 50 MB Produce is relayed while the proxy
holds a few hundred KiB of it, its answer comes back in its turn, and an acks=0 Produce streamed
the same way is owed no answer. The reader under both sides cuts frames of any size in any
pieces, streamed or not."""

from __future__ import annotations

import asyncio
import random
import struct
import tracemalloc
from typing import Any

import pytest

from kcompat.capture import CaptureEngine
from kcompat.faults import FaultEngine, rule_from_json
from kcompat.proxy.connection import ClientConnection
from kcompat.proxy.intercept import Intercept
from kcompat.proxy.node_map import NodeMap
from kcompat.proxy.relay_reader import STREAM_MIN, Pool, RelayReader
from kcompat.proxy.shared import Shared
from kcompat.wire.framing import FrameSizeError
from kcompat.wire.primitives import encode_uvarint
from kcompat.wire.protocol import decode_response, encode_request, encode_response, response_codec
from tests.proxy.stream_rig import close_rig

_SIZE = struct.Struct(">i")
BIG = 50 << 20
CHUNK = bytes(range(256)) * 4096  # 1 MiB of "records"
MARKER = b"R" * 16


class Sink:
    """Keeps what it is fed as it is, as a transport does until it has sent it: the reader must
    never write into memory it gave away (its pieces are fresh, its read buffer replaced)."""

    def __init__(self) -> None:
        self.parts: list[memoryview] = []
        self.done_count = 0

    def feed(self, data: memoryview) -> None:
        self.parts.append(data)

    def done(self) -> None:
        self.done_count += 1


@pytest.mark.parametrize("grow", [False, True])
def test_frames_of_any_size_in_any_pieces(grow: bool) -> None:
    rng = random.Random(3)
    sizes = [0, 1, 5, 1000, 70_000, STREAM_MIN - 1, STREAM_MIN, STREAM_MIN + 7, 3 << 20, 10]
    frames = [rng.randbytes(n) for n in sizes]
    wire = b"".join(_SIZE.pack(len(f)) + f for f in frames)
    got: list[bytes] = []
    sinks: list[Sink] = []

    def open_stream(size: int) -> Sink | None:
        if size % 2:  # odd sizes streamed, even ones held whole
            return None
        sinks.append(Sink())
        return sinks[-1]

    def on_frame(frame: bytes | bytearray) -> None:
        got.append(bytes(frame))

    reader = RelayReader(open_stream, on_frame, chunk=64 << 10, grow=grow)
    pos = 0
    while pos < len(wire):
        buf = reader.get_buffer()
        n = min(len(buf), rng.choice((1, 3, 4, 100, 5000, 1 << 20)), len(wire) - pos)
        buf[:n] = wire[pos : pos + n]
        reader.buffer_updated(n)
        pos += n
    streamed = [b"".join(s.parts) for s in sinks]
    assert all(s.done_count == 1 for s in sinks)
    expected_streamed = [f for f in frames if len(f) >= STREAM_MIN and len(f) % 2 == 0]
    assert streamed == expected_streamed
    assert got == [f for f in frames if f not in expected_streamed]


def test_a_pooled_piece_is_handed_out_again_only_once_nothing_refers_to_it() -> None:
    pool = Pool(1024, keep=2)
    first = pool.take()
    view = memoryview(first)[:10].cast("b")  # as a transport keeps what it has not sent yet
    del first
    second = pool.take()
    assert second is not view.obj
    view.obj[:3] = b"abc"  # type: ignore[index]
    assert bytes(second[:3]) == b"\x00\x00\x00"
    released = id(view.obj)
    del view
    assert id(pool.take()) == released  # sent: reused
    kept = [pool.take() for _ in range(3)]
    assert len({id(b) for b in kept}) == 3  # beyond `keep` in use: fresh ones


@pytest.mark.parametrize("piece", [256 << 10, 1000])
def test_streamed_pieces_reused_from_the_pool_keep_every_frame_intact(piece: int) -> None:
    """The pool's buffers come back once their views are gone: frames read into reused pieces
    while earlier ones were sent (and dropped) arrive whole and in order."""
    rng = random.Random(5)
    frames = [rng.randbytes(STREAM_MIN + rng.randrange(1 << 20)) for _ in range(6)]
    wire = b"".join(_SIZE.pack(len(f)) + f for f in frames)
    got: list[bytes] = []
    out = bytearray()
    unsent: list[memoryview] = []  # a transport's backlog: these pieces must not be reused yet

    class Sent:
        def feed(self, data: memoryview) -> None:
            unsent.append(data)
            while len(unsent) > 3:
                out.extend(unsent.pop(0))  # sent: the view is dropped, the piece may be reused

        def done(self) -> None:
            for view in unsent:
                out.extend(view)
            unsent.clear()
            got.append(bytes(out))
            out.clear()

    reader = RelayReader(lambda _: Sent(), got.append, piece=piece, pool=Pool(piece, 2))
    pos = 0
    while pos < len(wire):
        buf = reader.get_buffer()
        n = min(len(buf), rng.choice((4, 999, 5000, 70_000, 1 << 20)), len(wire) - pos)
        buf[:n] = wire[pos : pos + n]
        reader.buffer_updated(n)
        pos += n
    assert got == frames


def test_a_size_over_the_limit_is_refused_before_its_bytes() -> None:
    reader = RelayReader(lambda _: None, lambda _: None, max_size=1000, grow=True)
    buf = reader.get_buffer()
    buf[:4] = _SIZE.pack(1001)
    with pytest.raises(FrameSizeError):
        reader.buffer_updated(4)


def produce_frame(acks: int, correlation: int) -> tuple[bytes, bytes]:
    """A Produce v9 request with BIG bytes of records: (everything before them, everything after)."""
    body: dict[str, Any] = {
        "transactional_id": None, "acks": acks, "timeout_ms": 30000,
        "topic_data": [{"name": "orders", "partition_data": [{"index": 0, "records": MARKER}]}],
    }  # fmt: skip
    frame = encode_request(0, 9, correlation, body, client_id="app")
    at = frame.index(MARKER)
    head = frame[4 : at - 1] + encode_uvarint(BIG + 1)
    tail = frame[at + len(MARKER) :]
    return _SIZE.pack(len(head) + BIG + len(tail)) + head, tail


async def _upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while True:
        try:
            size = _SIZE.unpack(await reader.readexactly(4))[0]
        except asyncio.IncompleteReadError:
            break
        head = await reader.readexactly(min(size, 1024))
        left = size - len(head)
        while left:
            if not (piece := await reader.read(min(left, 1 << 20))):
                return
            left -= len(piece)
        # past key, version, correlation id, client id "app" (int16 length), header tags, null txn id
        correlation, acks = _SIZE.unpack_from(head, 4)[0], head[15:17]
        if acks != b"\x00\x00":
            answer = {
                "responses": [{"name": "orders", "partition_responses": [{"index": 0, "base_offset": 5}]}]
            }
            chunks = encode_response(0, 9, correlation, response_codec(0).build(answer))
            writer.write(b"".join(bytes(c) for c in chunks))
    writer.close()


async def _through_proxy(hooks: Intercept | None = None) -> tuple[int, list[int]]:
    upstream = await asyncio.start_server(_upstream, "127.0.0.1", 0)
    up_port = upstream.sockets[0].getsockname()[1]
    shared = Shared(
        NodeMap("127.0.0.1", 30000, 10, lambda _: None), [("127.0.0.1", up_port)], 100 << 20, 256 << 10, 5.0
    )
    if hooks is not None:  # the fault-injection hooks, as `kcompat proxy --admin` sets them
        shared.request_hook, shared.response_hook, shared.hooks_idle = (
            hooks.request,
            hooks.response,
            hooks.idle,
        )
    loop = asyncio.get_running_loop()
    proxy = await loop.create_server(lambda: ClientConnection(shared, None), "127.0.0.1", 0)
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.sockets[0].getsockname()[1])
    tracemalloc.reset_peak()
    for acks, correlation in ((0, 1), (1, 2)):  # the acks=0 one is owed no answer
        head, tail = produce_frame(acks, correlation)
        writer.write(head)
        for _ in range(BIG // len(CHUNK)):
            writer.write(CHUNK)
            await writer.drain()
        writer.write(tail)
        await writer.drain()
    size = _SIZE.unpack(await reader.readexactly(4))[0]
    correlation, body = decode_response(0, 9, await reader.readexactly(size))
    _, peak = tracemalloc.get_traced_memory()
    await close_rig(writer, shared, proxy, upstream)
    return peak, [correlation, body.responses[0].partition_responses[0].base_offset]


@pytest.mark.parametrize("hooks", ["none", "idle"])
def test_a_50_mb_produce_is_relayed_while_the_proxy_holds_little_of_it(hooks: str) -> None:
    tracemalloc.start()
    try:
        intercept = Intercept(FaultEngine(), CaptureEngine()) if hooks == "idle" else None
        peak, answer = asyncio.run(_through_proxy(intercept))
    finally:
        tracemalloc.stop()
    assert answer == [2, 5]  # the acks=1 Produce's answer, and none for the acks=0 one before it
    assert peak < 8 << 20, f"{peak >> 10} KiB held while relaying two {BIG >> 20} MiB requests"


def test_hooks_with_a_rule_armed_see_every_request_whole() -> None:
    hooks = Intercept(FaultEngine(), CaptureEngine())
    assert hooks.idle(None)
    hooks.faults.add(rule_from_json({"match": {"api": "Metadata"}, "action": {"kind": "error", "error": 6}}))
    assert not hooks.idle(None)  # then nothing streams: a rule may match any request
