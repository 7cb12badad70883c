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
    deprecated,
    fail,
    open_cluster,
    print_json,
    print_table,
    show_progress,
)
from kcompat.cmd.formats import ENCODINGS, FormatError, InputRecord, decode_text, line_parser, parse_headers
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
        default="%v",
        metavar="FORMAT",
        help="how a line splits into %%k key, %%v value, %%h headers (k=v,k=v) and %%p partition; default %%v",
    )
    p.add_argument("-f", dest="input_format", action=deprecated("--input-format"), help=argparse.SUPPRESS)
    p.add_argument(
        "--key-encoding", choices=ENCODINGS, default="text", help="how keys are written: text, hex or base64"
    )
    p.add_argument(
        "--value-encoding",
        choices=ENCODINGS,
        default="text",
        help="how values are written: text, hex or base64",
    )
    p.add_argument(
        "-Z",
        "--tombstone",
        "--null-value",
        dest="tombstone",
        action="store_true",
        help="send an empty value as null: a tombstone, which compaction removes with its key",
    )
    p.add_argument(
        "--no-auto-create",
        action="store_true",
        help="fail on a missing topic instead of letting the broker auto-create it",
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

    parse = line_parser(args.input_format, args.key_encoding, args.value_encoding)
    fixed_headers = parse_headers(args.header)
    fixed_key = decode_text(args.key, args.key_encoding, "--key") if args.key is not None else None
    if args.batch < 1:
        raise FormatError("--batch must be at least 1")
    ranges: dict[int, list[int]] = {}  # partition -> [first offset, last offset, count]
    total = 0
    with _input(args.file) as stream:
        progress = Progress(f"producing to {args.topic}", None, show_progress())
        try:
            with open_cluster(args) as cluster:
                topic = _topic(cluster, args.topic, auto_create=not args.no_auto_create)
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
                    value = None if args.tombstone and not rec.value else rec.value
                    partition, turn = _partition(args.partition, rec.partition, key, count, turn)
                    if partition not in topic.partitions:
                        raise FormatError(f"topic {args.topic} has no partition {partition} (it has {count})")
                    batch = pending.setdefault(partition, [])
                    batch.append(
                        Record(len(batch), int(time.time() * 1000), key, value, fixed_headers + rec.headers)
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


def _topic(cluster: Any, name: str, *, auto_create: bool) -> Any:
    """The topic's metadata; a missing one is auto-created when the broker allows it, and the user
    is told which happened (stderr, so stdout keeps only the report)."""
    from kcompat.client.errors import KafkaError
    from kcompat.wire.error_codes import ErrorCode

    info = cluster.metadata([name]).topics.get(name)
    if info is not None and not info.error_code:
        return info
    if not auto_create or (info is not None and info.error_code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
        return cluster.topic(name)  # raises with the broker's error
    # Kafka 4.x answers the creating request UNKNOWN_TOPIC_OR_PARTITION too: a few seconds of that
    # means the broker does not auto-create; LEADER_NOT_AVAILABLE means it is on its way.
    started = time.monotonic()
    while True:
        info = cluster.metadata([name], auto_create=True).topics.get(name)
        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if info is None else info.error_code
        if not code and info is not None and all(p.leader >= 0 for p in info.partitions.values()):
            fail(
                f"topic {name} did not exist: the broker auto-created it with {len(info.partitions)} "
                "partition(s) (auto.create.topics.enable=true)"
            )
            return info
        waited = time.monotonic() - started
        if waited > cluster.timeout or (code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and waited > 3.0):
            if code in (0, ErrorCode.LEADER_NOT_AVAILABLE):
                code = ErrorCode.LEADER_NOT_AVAILABLE
            raise KafkaError(
                code,
                f"topic {name}",
                "it does not exist and the broker did not auto-create it (auto.create.topics.enable=false?); "
                f"create it with: kcompat topic create {name}",
            )
        time.sleep(0.1)


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
