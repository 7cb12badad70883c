"""The write seam: bytes and file slices, in order, zero-copy where possible, resuming when full."""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kcompat.log.log_file import FetchSlice, FilePiece, LogFile
from kcompat.server.network import sendfile, turns
from kcompat.server.network.sendfile import STATS, ChunkWriter, SliceTruncated, send_chunks
from tests.server.harness import pattern

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A TCP connection on 127.0.0.1: (non-blocking server side with a small buffer, client side)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 32 << 10)
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 << 10)
    server.setblocking(False)
    yield server, client
    server.close()
    client.close()


@pytest.fixture(autouse=True)
def fresh_stats() -> None:
    STATS.reset()


def log_file(tmp_path: Path, name: str, data: bytes) -> LogFile:
    f = LogFile(tmp_path / name)
    f.append(data)
    return f


def drain(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(1 << 20)
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


def send_all(server: socket.socket, client: socket.socket, chunks: list[Any], n: int) -> bytes:
    """Send `chunks` with send_chunks on an event loop while a thread reads `n` bytes."""
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(drain(client, n)))
    reader.start()
    asyncio.run(send_chunks(server, chunks))
    reader.join(10)
    return got[0]


def wake(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)


def finish(server: socket.socket, client: socket.socket, writer: ChunkWriter, n: int) -> bytes:
    """Flush `writer` each time the socket is writable while a thread reads `n` bytes."""
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(drain(client, n)))
    reader.start()

    async def run() -> None:
        loop = asyncio.get_running_loop()
        while not writer.flush():
            ready = loop.create_future()
            loop.add_writer(server.fileno(), wake, ready)
            await ready
            loop.remove_writer(server.fileno())

    asyncio.run(run())
    reader.join(10)
    return got[0]


def test_bytes_chunks_are_gathered_in_order(pair: tuple[socket.socket, socket.socket]) -> None:
    server, client = pair
    chunks: list[Any] = [b"a", bytearray(b"bc"), memoryview(b"xdefx")[1:4], b"", b"g" * 300_000]
    expect = b"abcdef" + b"g" * 300_000
    assert send_all(server, client, chunks, len(expect)) == expect


def test_file_slices_use_sendfile_and_resume_when_the_socket_is_full(
    pair: tuple[socket.socket, socket.socket], tmp_path: Path
) -> None:
    server, client = pair
    data = pattern(3 << 20)
    a = log_file(tmp_path, "a.log", b"junk" + data[: 2 << 20])
    b = log_file(tmp_path, "b.log", data[2 << 20 :] + b"junk")
    fetch = FetchSlice((FilePiece(a, 4, 2 << 20), FilePiece(b, 0, 1 << 20)), 0)
    writer = ChunkWriter(server)
    writer.add([b"head", fetch, b"tail"])
    assert writer.pending == 8 + len(data)
    assert writer.flush() is False  # 3 MiB cannot fit a 32 KiB socket buffer: the writer waits
    assert 0 < writer.pending < 8 + len(data)
    expect = b"head" + data + b"tail"
    assert finish(server, client, writer, len(expect)) == expect
    assert writer.pending == 0
    assert STATS.fallback_pieces == 0 and STATS.fallback_bytes == 0
    assert STATS.sendfile_bytes == len(data) and STATS.sendfile_calls > 2


def test_copying_fallback_when_sendfile_is_missing(
    pair: tuple[socket.socket, socket.socket], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, client = pair
    monkeypatch.setattr(sendfile, "_sendfile", None)
    data = pattern(1 << 20)
    f = log_file(tmp_path, "a.log", data)
    expect = b"<" + data[10:] + b">"
    assert (
        send_all(server, client, [b"<", FetchSlice((FilePiece(f, 10, len(data) - 10),)), b">"], len(expect))
        == expect
    )
    assert STATS.sendfile_calls == 0
    assert STATS.fallback_pieces == 1 and STATS.fallback_bytes == len(data) - 10


def test_copying_fallback_when_the_kernel_refuses(
    pair: tuple[socket.socket, socket.socket], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, client = pair

    def refuse(out_fd: int, in_fd: int, offset: int, count: int) -> int:
        raise OSError(errno.EINVAL, "Invalid argument")

    monkeypatch.setattr(sendfile, "_sendfile", refuse)
    data = pattern(200_000)
    f = log_file(tmp_path, "a.log", data)
    assert send_all(server, client, [FilePiece(f, 0, len(data))], len(data)) == data
    assert STATS.fallback_pieces == 1 and STATS.fallback_bytes == len(data) and STATS.sendfile_bytes == 0


def test_small_pieces_are_read_and_gathered_with_the_bytes_around_them(
    pair: tuple[socket.socket, socket.socket], tmp_path: Path
) -> None:
    """A fetch of many partitions with a little data each: every small piece goes out in a
    sendmsg with its neighbours, in order, across a full socket; a large one still by sendfile."""
    server, client = pair
    data = pattern(1 << 20)
    f = log_file(tmp_path, "a.log", data)
    chunks: list[Any] = []
    expect = bytearray()
    for i in range(300):  # ~150 KiB in all: more than the 32 KiB socket buffer takes at once
        at, size = i * 997, 100 + i * 3
        chunks += [f"<{i}>".encode(), FetchSlice((FilePiece(f, at, size),), 0)]
        expect += f"<{i}>".encode() + data[at : at + size]
    big = sendfile._INLINE_MAX + 1
    chunks += [b"[", FilePiece(f, 5, big), b"]"]
    expect += b"[" + data[5 : 5 + big] + b"]"
    writer = ChunkWriter(server)
    writer.add(chunks)
    assert writer.pending == len(expect)
    assert writer.flush() is False
    assert finish(server, client, writer, len(expect)) == expect
    assert writer.pending == 0
    assert STATS.inline_pieces == 300 and STATS.inline_bytes == sum(100 + i * 3 for i in range(300))
    assert STATS.sendfile_bytes == big and STATS.fallback_pieces == 0


def test_other_sendfile_errors_propagate(
    pair: tuple[socket.socket, socket.socket], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, _ = pair

    def reset(out_fd: int, in_fd: int, offset: int, count: int) -> int:
        raise ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")

    monkeypatch.setattr(sendfile, "_sendfile", reset)
    writer = ChunkWriter(server)
    size = sendfile._INLINE_MAX + 1  # a small piece would be read, not sent with sendfile
    writer.add([FilePiece(log_file(tmp_path, "a.log", b"x" * size), 0, size)])
    with pytest.raises(ConnectionResetError):
        writer.flush()


def test_a_deleted_segment_stays_readable_through_the_slice(
    pair: tuple[socket.socket, socket.socket], tmp_path: Path
) -> None:
    server, client = pair
    data = pattern(500_000)
    f = log_file(tmp_path, "00000000000000000000.log", data)
    fetch = FetchSlice((FilePiece(f, 0, len(data)),), 0)
    writer = ChunkWriter(server)
    writer.add([fetch])
    del fetch, f  # only the writer holds the file now
    (tmp_path / "00000000000000000000.log").unlink()  # retention deletes the segment mid-send
    assert writer.flush() is False
    assert finish(server, client, writer, len(data)) == data


def test_a_truncated_file_cannot_honour_the_slice(
    pair: tuple[socket.socket, socket.socket], tmp_path: Path
) -> None:
    server, _ = pair
    f = log_file(tmp_path, "a.log", b"x" * 1000)
    writer = ChunkWriter(server)
    writer.add([FilePiece(f, 0, 1000)])
    f.truncate(600)
    with pytest.raises(SliceTruncated):
        writer.flush()


def test_a_closed_file_is_refused_not_sent(pair: tuple[socket.socket, socket.socket], tmp_path: Path) -> None:
    server, _ = pair
    f = log_file(tmp_path, "a.log", b"x" * 1000)
    writer = ChunkWriter(server)
    writer.add([FilePiece(f, 0, 1000)])
    f.close()  # an fd number that might be reused by another file must never be read
    with pytest.raises(SliceTruncated):
        writer.flush()


def test_clear_releases_the_files(pair: tuple[socket.socket, socket.socket], tmp_path: Path) -> None:
    server, _ = pair
    f = log_file(tmp_path, "a.log", b"x" * 1000)
    fd = f.fd
    writer = ChunkWriter(server)
    writer.add([FilePiece(f, 0, 1000)])
    del f
    os.fstat(fd)  # still open: the writer holds it
    writer.clear()
    assert writer.pending == 0
    with pytest.raises(OSError):
        os.fstat(fd)


def test_a_long_flush_gives_the_loop_a_turn(
    pair: tuple[socket.socket, socket.socket], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past turns.TURN_SECONDS of writing, flush() stops as if the socket were full (the caller
    waits for writability, at once): with 0, one step per call, and everything still arrives in order."""
    server, client = pair
    monkeypatch.setattr(turns, "TURN_SECONDS", 0.0)
    monkeypatch.setattr(sendfile, "_MAX_IOV", 4)  # 40 chunks: ten sendmsg steps
    f = log_file(tmp_path, "a.log", pattern(10_000))
    chunks: list[Any] = []
    for i in range(20):
        chunks += [f"<{i}>".encode(), FilePiece(f, i * 100, 50)]
    expect = b"".join(f"<{i}>".encode() + pattern(10_000)[i * 100 : i * 100 + 50] for i in range(20))
    writer = ChunkWriter(server)
    writer.add(chunks)
    calls = 0
    while not writer.flush():
        calls += 1
        assert calls < 100
    assert calls == 9  # the socket had room for all of it: only the turns stopped it, after each step
    assert drain(client, len(expect)) == expect
