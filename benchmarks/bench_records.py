"""Record-layer micro-benchmark (not a test): .venv/bin/python benchmarks/bench_records.py

Prints header parse time per batch, CRC32C verify throughput, validate_batch per batch, record
decode/encode per record, compress/decompress MB/s per codec, and python-snappy vs cramjam.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import cramjam

from kcompat.wire import compression
from kcompat.wire.compression import Compression
from kcompat.wire.record_batch import compute_crc, read_header, validate_batch
from kcompat.wire.records import Record, build_batch, decode_batch


def best_of(fn: Callable[[], object], number: int, repeat: int = 5) -> float:
    """Best seconds per call over `repeat` runs of `number` calls."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return best


def payload(size: int) -> bytes:
    # JSON-ish records: compressible like real traffic, not a run of zeros.
    rows = [b'{"id": %d, "user": "user-%d", "event": "click", "ts": %d}' % (i, i % 97, 1_700_000_000_000 + i)
            for i in range(size // 50 + 1)]  # fmt: skip
    return b"\n".join(rows)[:size]


def main() -> None:
    records = [Record(i, 1_700_000_000_000 + i, b"key-%d" % i, payload(200)) for i in range(500)]
    batch = build_batch(records)
    mb = len(batch) / 1e6
    print(f"batch: {len(records)} records, {len(batch)} bytes uncompressed")
    print(f"read_header:             {best_of(lambda: read_header(batch), 200_000) * 1e9:8.0f} ns/batch")
    t = best_of(lambda: compute_crc(batch), 2_000)
    print(f"CRC32C verify:           {mb / t:8.0f} MB/s")
    small = build_batch(records[:5])
    print(f"validate_batch (5 rec):  {best_of(lambda: validate_batch(small), 100_000) * 1e9:8.0f} ns/batch")
    print(
        f"validate_batch (500):    {best_of(lambda: validate_batch(batch), 2_000) * 1e6:8.1f} us/batch (CRC-bound)"
    )
    t = best_of(lambda: decode_batch(batch), 20)
    print(f"decode_batch:            {t / len(records) * 1e9:8.0f} ns/record")
    t = best_of(lambda: build_batch(records), 20)
    print(f"build_batch:             {t / len(records) * 1e9:8.0f} ns/record")

    data = payload(1_000_000)
    print(f"\ncodecs on {len(data)} bytes of JSON-like text (MB/s of uncompressed data):")
    print(f"{'codec':8} {'ratio':>6} {'compress':>10} {'decompress':>11}")
    for cid in (Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD):
        z = compression.compress(cid, data)
        tc = best_of(lambda cid=cid: compression.compress(cid, data), 3, 3)
        td = best_of(lambda cid=cid, z=z: compression.decompress(cid, z), 5, 3)
        print(f"{cid.name.lower():8} {len(data) / len(z):6.2f} {1 / tc:10.0f} {1 / td:11.0f}")

    print("\nsnappy libraries, raw blocks of 32 KiB (as inside the xerial framing):")
    block = data[: 32 * 1024]
    raw = bytes(cramjam.snappy.compress_raw(block))
    n = 2_000
    rows = [
        ("cramjam", lambda: cramjam.snappy.compress_raw(block), lambda: cramjam.snappy.decompress_raw(raw)),
    ]
    try:
        import snappy  # python-snappy, measured only: not a dependency

        rows.append(("python-snappy", lambda: snappy.compress(block), lambda: snappy.decompress(raw)))
        version = getattr(snappy, "__version__", "?")
    except ImportError:
        version = "not installed"
    for name, comp, decomp in rows:
        tc, td = best_of(comp, n), best_of(decomp, n)
        print(
            f"{name:14} compress {len(block) / tc / 1e6:7.0f} MB/s   decompress {len(block) / td / 1e6:7.0f} MB/s"
        )
    print(f"python-snappy version: {version}")


if __name__ == "__main__":
    main()
