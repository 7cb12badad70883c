#!/usr/bin/env python3
"""Codec micro-benchmark: decode + encode of real clients' Produce v9 and Fetch v12 requests.

    python benchmarks/bench_wire.py

The frames are the ones captured from kafka-python in tests/wire/golden/requests. Prints the
best of several rounds per operation (microseconds), and RecordBatch header parsing per batch.
Figures, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import timeit
from pathlib import Path

from kcompat.wire import protocol
from kcompat.wire.record_batch import crc_ok, read_header

GOLDEN = Path(__file__).resolve().parent.parent / "tests" / "wire" / "golden" / "requests" / "kafka-python"


def best_us(fn, number: int) -> float:  # type: ignore[no-untyped-def]
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def main() -> None:
    for name in ("Produce-v9", "Fetch-v12", "Metadata-v12"):
        frame = bytes.fromhex((GOLDEN / f"{name}.hex").read_text().strip())
        req = protocol.decode_request(frame)
        codec = protocol.request_codec(req.api_key)
        decode = best_us(lambda frame=frame: protocol.decode_request(frame), 20000)
        encode = best_us(lambda req=req, codec=codec: codec.encode(req.body, req.api_version), 20000)
        print(
            f"{name:14} {len(frame):5} B   decode {decode:6.2f} us   encode {encode:6.2f} us   both {decode + encode:6.2f} us"
        )
    produce = protocol.decode_request(bytes.fromhex((GOLDEN / "Produce-v9.hex").read_text().strip()))
    batch = bytes(produce.body.topic_data[0].partition_data[0].records)
    header_ns = best_us(lambda: read_header(batch), 200000) * 1000
    crc_ns = best_us(lambda: crc_ok(batch), 200000) * 1000
    print(
        f"RecordBatch header parse {header_ns:6.0f} ns/batch;  CRC32C check of a {len(batch)} B batch {crc_ns:6.0f} ns"
    )


if __name__ == "__main__":
    main()
