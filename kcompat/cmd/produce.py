"""`kcompat produce TOPIC`: one record per input line, from stdin or --file.

Where a record goes: --partition, else the line's %p, else its key's murmur2 partition (as Java's
and librdkafka's default partitioners choose), else the partitions in turn. Records are sent in
batches of up to --batch records per partition (one Produce per leader per batch), acks=all by default.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Iterator
from typing import Any, TextIO

from kcompat.cmd.common import (
    Progress,
    add_connection_options,
    open_cluster,
    print_json,
    print_table,
    show_progress,
)
from kcompat.cmd.formats import FormatError, InputRecord, line_parser, parse_headers
from kcompat.cmd.partitioner import partition_for_key

COMPRESSION = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
_BATCH_BYTES = 512 * 1024


def register(commands: Any) -> None:
    p = commands.add_parser(
        "produce",
        help="produce records, one per input line",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("--file", metavar="PATH", help="read lines from PATH instead of stdin")
    p.add_argument("-k", "--key", help="key for every record")
    p.add_argument(
        "-H", "--header", action="append", default=[], metavar="KEY=VALUE", help="header for every record"
    )
    p.add_argument("-p", "--partition", type=int, help="send every record to this partition")
    p.add_argument(
        "--input-format",
        "-f",
        default="%v",
        metavar="FORMAT",
        help="how a line splits into %%k key, %%v value, %%h headers (k=v,k=v) and %%p partition; default %%v",
    )
    p.add_argument(
        "--acks", type=int, choices=(-1, 0, 1), default=-1, help="-1 all (default), 1 leader, 0 none"
    )
    p.add_argument("-z", "--compression", choices=sorted(COMPRESSION), default="none")
    p.add_argument(
        "--batch",
        type=int,
        default=1000,
        metavar="N",
        help="records per partition per request (default 1000)",
    )
    add_connection_options(p)
    p.set_defaults(handler=produce)


def _lines(stream: TextIO) -> Any:
    for line in stream:
        yield line.removesuffix("\n")


def produce(args: argparse.Namespace) -> int:
    from kcompat.client import records
    from kcompat.wire.records import Record

    parse = line_parser(args.input_format)
    fixed_headers = parse_headers(args.header)
    fixed_key = args.key.encode() if args.key is not None else None
    if args.batch < 1:
        raise FormatError("--batch must be at least 1")
    ranges: dict[int, list[int]] = {}  # partition -> [first offset, last offset, count]
    total = 0
    with _input(args.file) as stream:
        progress = Progress(f"producing to {args.topic}", None, show_progress())
        try:
            with open_cluster(args) as cluster:
                topic = cluster.topic(args.topic)
                count = len(topic.partitions)
                pending: dict[int, list[Record]] = {}
                pending_bytes = 0
                turn = 0

                def flush() -> None:
                    nonlocal pending, pending_bytes
                    if not pending:
                        return
                    bases = records.produce(
                        cluster, topic, pending, acks=args.acks, compression=COMPRESSION[args.compression]
                    )
                    for p, base in bases.items():
                        n = len(pending[p])
                        r = ranges.setdefault(p, [base, base, 0])
                        r[1] = base + n - 1 if base >= 0 else -1
                        r[2] += n
                    progress.advance(sum(len(v) for v in pending.values()))
                    pending, pending_bytes = {}, 0

                for line in _lines(stream):
                    rec: InputRecord = parse(line)
                    key = fixed_key if fixed_key is not None else rec.key
                    partition, turn = _partition(args.partition, rec.partition, key, count, turn)
                    if partition not in topic.partitions:
                        raise FormatError(f"topic {args.topic} has no partition {partition} (it has {count})")
                    batch = pending.setdefault(partition, [])
                    batch.append(
                        Record(
                            len(batch), int(time.time() * 1000), key, rec.value, fixed_headers + rec.headers
                        )
                    )
                    total += 1
                    pending_bytes += len(line) + (len(key) if key else 0)
                    if len(batch) >= args.batch or pending_bytes >= _BATCH_BYTES:
                        flush()
                flush()
        finally:
            progress.close()
    _report(args, total, ranges)
    return 0


@contextlib.contextmanager
def _input(path: str | None) -> Iterator[TextIO]:
    """The lines' source: stdin, or the file at `path` (closed afterwards)."""
    if not path:
        yield sys.stdin
        return
    with contextlib.ExitStack() as stack:
        try:
            stream = stack.enter_context(open(path, encoding="utf-8"))
        except OSError as e:
            raise FormatError(f"cannot read {path}: {e.strerror}") from None
        yield stream


def _partition(
    fixed: int | None, line_partition: int | None, key: bytes | None, count: int, turn: int
) -> tuple[int, int]:
    """(partition, next turn): --partition, else the line's %p, else the key's, else round robin."""
    if fixed is not None:
        return fixed, turn
    if line_partition is not None:
        return line_partition, turn
    if key is not None:
        return partition_for_key(key, count), turn
    return turn % count, turn + 1


def _report(args: argparse.Namespace, total: int, ranges: dict[int, list[int]]) -> None:
    rows = [
        {"partition": p, "first_offset": r[0], "last_offset": r[1], "records": r[2]}
        for p, r in sorted(ranges.items())
    ]
    if args.format == "json":
        print_json({"topic": args.topic, "records": total, "partitions": rows})
    else:
        print(f"produced {total} record{'s' if total != 1 else ''} to {args.topic}")
        if rows:
            print_table(
                ("PARTITION", "RECORDS", "FIRST-OFFSET", "LAST-OFFSET"),
                [(r["partition"], r["records"], r["first_offset"], r["last_offset"]) for r in rows],
            )
