"""Regenerate the golden record batches in this folder from the real client libraries.

    .venv/bin/python tests/wire/golden/records/make_golden.py

Run once; the committed files pin those bytes even if the libraries change. Each `<name>.hex` is
one batch (or message set) as the named library built it, and records.json the records put in.
"""

from __future__ import annotations

import json
from pathlib import Path

from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

HERE = Path(__file__).parent
BASE_TS = 1_700_000_000_000
CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def records() -> list[dict[str, object]]:
    return [
        {
            "offset": i,
            "timestamp": BASE_TS + 7 * i,
            "key": None if i % 3 == 0 else f"key-{i}".encode().hex(),
            "value": None if i == 4 else (b"value %d " % i * (i + 3)).hex(),
            "headers": [["h-empty", ""], ["trace", "00ff"], ["nil", None]][: i % 4],
        }
        for i in range(6)
    ]


def _args(
    r: dict[str, object],
) -> tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]:
    key = None if r["key"] is None else bytes.fromhex(str(r["key"]))
    value = None if r["value"] is None else bytes.fromhex(str(r["value"]))
    headers = [(k, None if v is None else bytes.fromhex(v)) for k, v in r["headers"]]  # type: ignore[attr-defined]
    return int(r["offset"]), int(r["timestamp"]), key, value, headers  # type: ignore[call-overload]


def main() -> None:
    recs = records()
    (HERE / "records.json").write_text(json.dumps(recs, indent=1) + "\n")
    for cid, name in CODECS.items():
        for lib, builder_cls in (("kafka_python", KpBuilder), ("aiokafka", AioBuilder)):
            b = builder_cls(2, cid, False, 1234, 5, 10, 1 << 20)
            for r in recs:
                b.append(*_args(r))
            (HERE / f"{lib}_v2_{name}.hex").write_text(bytes(b.build()).hex() + "\n")
    for magic in (0, 1):
        for cid in (0, 1, 2):  # magic-0 lz4 needs xxhash, which is not installed
            lb = LegacyRecordBatchBuilder(magic, cid, 1 << 20)
            for r in recs:
                offset, ts, key, value, _ = _args(r)
                lb.append(offset, ts if magic else None, key, value)
            (HERE / f"kafka_python_v{magic}_{CODECS[cid]}.hex").write_text(bytes(lb.build()).hex() + "\n")
    lb = LegacyRecordBatchBuilder(1, 3, 1 << 20)
    for r in recs:
        offset, ts, key, value, _ = _args(r)
        lb.append(offset, ts, key, value)
    (HERE / "kafka_python_v1_lz4.hex").write_text(bytes(lb.build()).hex() + "\n")


if __name__ == "__main__":
    main()
