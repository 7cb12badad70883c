"""FrameReader: byte inputs in, frames / "need more" / a size error out; no sockets, no clock."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcompat.wire.framing import BODY_STEP, FrameReader, FrameSizeError


def frame(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


def drain(reader: FrameReader) -> list[bytes]:
    out = []
    while (f := reader.next_frame()) is not None:
        out.append(bytes(f))
    return out


# (bytes fed in pieces, frames expected out, bytes still buffered)
CASES = [
    ([b""], [], 0),
    ([b"\x00\x00"], [], 2),  # half a prefix
    ([b"\x00\x00\x00\x00"], [b""], 0),  # an empty frame is a frame
    ([b"\x00\x00\x00\x03ab"], [], 6),  # one byte short
    ([b"\x00\x00\x00\x03abc"], [b"abc"], 0),
    ([b"\x00\x00", b"\x00\x03a", b"bc"], [b"abc"], 0),  # split inside the prefix and the body
    ([frame(b"x") + frame(b"yz") + b"\x00"], [b"x", b"yz"], 1),  # packed, with the start of a third
    ([frame(b"a" * 100)[:50], frame(b"a" * 100)[50:] + frame(b"b")], [b"a" * 100, b"b"], 0),
]


@pytest.mark.parametrize(("pieces", "frames", "left"), CASES)
def test_table(pieces: list[bytes], frames: list[bytes], left: int) -> None:
    r = FrameReader(1000, buffer_size=64)
    got = []
    for p in pieces:
        r.feed(p)
        got += drain(r)
    assert got == frames
    assert r.buffered == left


# (prefix, max size, message fragment)
BAD = [
    (b"\xff\xff\xff\xff", 100, "invalid frame size -1"),
    (b"\x80\x00\x00\x00", 100, "invalid frame size -2147483648"),
    ((101).to_bytes(4, "big"), 100, "frame size 101 is larger than 100"),
    (b"\x16\x03\x01\x02", 100, "looks like a TLS handshake"),
    (b"GET ", 100, "looks like HTTP"),
]


@pytest.mark.parametrize(("prefix", "max_size", "message"), BAD)
def test_bad_size_is_refused_before_the_body(prefix: bytes, max_size: int, message: str) -> None:
    r = FrameReader(max_size, buffer_size=64)
    r.feed(prefix)  # no body bytes at all: the prefix alone is enough to refuse
    with pytest.raises(FrameSizeError, match=message) as e:
        r.next_frame()
    assert e.value.prefix == prefix
    with pytest.raises(FrameSizeError):  # the reader stays failed
        r.next_frame()


def test_exact_limit_is_accepted() -> None:
    r = FrameReader(100, buffer_size=64)
    r.feed(frame(b"z" * 100))
    assert drain(r) == [b"z" * 100]


def test_large_frame_memory_follows_the_bytes_received() -> None:
    """A 100 MiB prefix with a few bytes behind it costs BODY_STEP, not 100 MiB."""
    r = FrameReader(200 << 20, buffer_size=64)
    r.feed((100 << 20).to_bytes(4, "big") + b"abc")
    assert r.next_frame() is None
    assert len(r.get_buffer()) == BODY_STEP - 3
    assert r.expected == 4 + (100 << 20)
    assert r.buffered == 7


def test_large_frame_grows_to_its_size_and_is_a_buffer_of_its_own() -> None:
    body = bytes(range(256)) * (20 * BODY_STEP // 256 + 1)  # past two GROWTH-fold steps of BODY_STEP
    r = FrameReader(32 * BODY_STEP, buffer_size=64)
    r.feed(frame(body)[:10])
    assert r.next_frame() is None
    r.feed(frame(body)[10:] + frame(b"next"))
    first = r.next_frame()
    assert isinstance(first, bytearray) and first == body
    assert r.next_frame() == b"next"


def test_expected_and_buffered_describe_a_partial_frame() -> None:
    r = FrameReader(1000, buffer_size=64)
    r.feed(b"\x00\x00")
    assert (r.buffered, r.expected) == (2, None)
    r.feed(b"\x00\x0aabc")
    assert r.next_frame() is None
    assert (r.buffered, r.expected) == (7, 14)


def test_release_gives_back_an_empty_buffer_only() -> None:
    r = FrameReader(1000, buffer_size=64)
    r.feed(b"\x00\x00\x00\x05ab")
    assert r.next_frame() is None
    r.release()  # holds a partial frame: kept
    r.feed(b"cde")
    assert r.next_frame() == b"abcde"
    r.release()
    assert r.buffered == 0
    r.feed(frame(b"again"))
    assert r.next_frame() == b"again"


def test_frames_are_copies_not_views_of_the_read_buffer() -> None:
    r = FrameReader(1000, buffer_size=64)
    r.feed(frame(b"keep") + frame(b"over"))
    first = r.next_frame()
    r.feed(frame(b"xxxx") * 8)  # reuses the read buffer
    assert first == b"keep" and isinstance(first, bytearray)


def test_get_buffer_is_never_empty() -> None:
    """A caller that fills the buffer without taking frames still gets room (the buffer grows)."""
    r = FrameReader(1000, buffer_size=16)
    for _ in range(10):
        buf = r.get_buffer()
        assert len(buf) > 0
        buf[: len(buf)] = b"\x00" * len(buf)  # empty frames, never taken
        r.buffer_updated(len(buf))
    assert r.buffered > 16


bodies = st.lists(st.binary(max_size=300), max_size=20)


@st.composite
def stream_and_cuts(draw: st.DrawFn) -> tuple[list[bytes], bytes, list[int]]:
    frames = draw(bodies)
    data = b"".join(frame(b) for b in frames)
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=30)))
    return frames, data, cuts


@settings(max_examples=300, deadline=None)
@given(stream_and_cuts(), st.sampled_from([8, 64, 1024]), st.booleans())
def test_any_chunking_gives_the_same_frames(
    case: tuple[list[bytes], bytes, list[int]], buffer_size: int, take_as_they_come: bool
) -> None:
    """However the stream is cut (and whether frames are taken after each piece or at the end),
    the frames out are the frames in, in order, and nothing is left over."""
    frames, data, cuts = case
    r = FrameReader(1000, buffer_size=buffer_size)
    got: list[bytes] = []
    for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True):
        r.feed(data[a:b])
        if take_as_they_come:
            got += drain(r)
    got += drain(r)
    assert got == frames
    assert r.buffered == 0


@settings(max_examples=200, deadline=None)
@given(stream_and_cuts(), st.integers(1, 700))
def test_receiving_into_get_buffer_in_short_reads(
    case: tuple[list[bytes], bytes, list[int]], most: int
) -> None:
    """The recv_into path: each read fills at most `most` bytes of what get_buffer offers."""
    frames, data, _ = case
    r = FrameReader(1000, buffer_size=64)
    got: list[bytes] = []
    pos = 0
    while pos < len(data):
        buf = r.get_buffer()
        n = min(len(buf), most, len(data) - pos)
        buf[:n] = data[pos : pos + n]
        r.buffer_updated(n)
        pos += n
        got += drain(r)
    assert got == frames


@settings(max_examples=200, deadline=None)
@given(bodies, st.integers(-(2**31), 2**31 - 1).filter(lambda n: n < 0 or n > 1000), st.integers(1, 9))
def test_a_bad_prefix_after_good_frames(frames: list[bytes], size: int, piece: int) -> None:
    """Every frame before the bad prefix comes out; then the error, however the bytes were cut."""
    data = b"".join(frame(b) for b in frames) + size.to_bytes(4, "big", signed=True) + b"junk"
    r = FrameReader(1000, buffer_size=64)
    got: list[bytes] = []
    with pytest.raises(FrameSizeError) as e:
        for i in range(0, len(data), piece):
            r.feed(data[i : i + piece])
            while (f := r.next_frame()) is not None:
                got.append(bytes(f))
    assert got == frames
    assert e.value.size == size


def test_take_stops_at_count_and_at_the_frame_that_crosses_nbytes() -> None:
    r = FrameReader(1000, buffer_size=64)
    r.feed(frame(b"a" * 10) + frame(b"b" * 10) + frame(b"c" * 10) + frame(b"d"))
    out: list[bytes | bytearray] = []
    assert r.take(out, 2, 1000) == 20 and out == [b"a" * 10, b"b" * 10]
    assert r.take(out, 5, 5) == 10 and out[2:] == [b"c" * 10]  # crosses 5 bytes: one frame
    assert r.take(out, 0, 1000) == 0 and r.take(out, 5, 0) == 0
    assert r.take(out, 5, 1000) == 1 and out[3:] == [b"d"]


@settings(max_examples=200, deadline=None)
@given(
    stream_and_cuts(), st.lists(st.tuples(st.integers(0, 4), st.integers(0, 400)), min_size=1, max_size=10)
)
def test_take_in_any_batches_gives_the_same_frames(
    case: tuple[list[bytes], bytes, list[int]], batches: list[tuple[int, int]]
) -> None:
    """The Connection's path: after each piece, take() with whatever room there is."""
    frames, data, cuts = case
    r = FrameReader(1000, buffer_size=64)
    got: list[bytes | bytearray] = []
    for i, (a, b) in enumerate(zip([0, *cuts], [*cuts, len(data)], strict=True)):
        r.feed(data[a:b])
        count, nbytes = batches[i % len(batches)]
        before = len(got)
        added = r.take(got, count, nbytes)
        assert len(got) - before <= count and added == sum(len(f) for f in got[before:])
    while r.take(got, 1, 1):
        pass
    while (f := r.next_frame()) is not None:  # empty frames add 0 bytes
        got.append(f)
    assert [bytes(f) for f in got] == frames
    assert r.buffered == 0
