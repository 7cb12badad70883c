"""`kcompat consume TOPIC`: records to stdout, each rendered by --format.

Without --follow it stops at the end each partition had when it started (as `kcat -e` does);
with --num N after N records. The default format prints each value on its own line, so
`kcompat produce t < lines` then `kcompat consume t` gives the lines back.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from kcompat.cmd.common import (
    Progress,
    add_connection_options,
    deprecated,
    fail,
    open_cluster,
    show_progress,
)
from kcompat.cmd.formats import (
    ENCODINGS,
    RecordView,
    is_text,
    parse_format,
    parse_offset,
    parse_partitions,
    record_json,
    render,
)


def register(commands: Any) -> None:
    p = commands.add_parser(
        "consume",
        help="print records of a topic",
        description=__doc__ + "\nformat placeholders: %t topic  %p partition  %o offset  %d timestamp (ms)  "
        "%k key  %v value\n  %h headers (k=v,...)  %K key length  %V value length  %% percent; "
        "escapes \\n \\t \\\\; 'json' prints one JSON object a record",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument(
        "-o",
        "--offset",
        default="start",
        help="start (default), end, N, -N (N before the end) or @TIMESTAMP_MS (first record at or after it)",
    )
    p.add_argument("-n", "--num", type=int, help="stop after N records")
    p.add_argument("-p", "--partitions", help="partitions, e.g. 0,2,4-6 (default all)")
    p.add_argument(
        "--record-format",
        "--print",
        dest="record_format",
        default="%v\\n",
        metavar="FORMAT",
        help="how each record is printed (placeholders below; default '%%v\\n')",
    )
    p.add_argument(
        "--output",
        choices=("text", "json"),
        default="text",
        help="json: one JSON object a record (binary keys and values base64, see --encoding)",
    )
    p.add_argument(
        "-f",
        "--format",
        dest="record_format",
        action=deprecated("--record-format (or --output json)"),
        help=argparse.SUPPRESS,
    )
    p.add_argument(
        "-g",
        "--group",
        metavar="GROUP",
        help="start from GROUP's committed offsets (--offset where it has none) and commit what is printed",
    )
    p.add_argument(
        "--key-encoding", choices=ENCODINGS, default="text", help="print keys as text, hex or base64"
    )
    p.add_argument(
        "--value-encoding", choices=ENCODINGS, default="text", help="print values as text, hex or base64"
    )
    p.add_argument("--follow", action="store_true", help="keep waiting for new records (Ctrl-C stops)")
    p.add_argument(
        "--max-wait-ms", type=int, default=500, help="how long a Fetch waits for data (default 500)"
    )
    add_connection_options(p, output=False)
    p.set_defaults(handler=consume)


def start_positions(
    spec_text: str, marks: dict[int, tuple[int, int]], by_time: dict[int, int] | None
) -> dict[int, int]:
    """partition -> first offset to read, from an --offset spec and each partition's (start, end)."""
    spec = parse_offset(spec_text)
    out = {}
    for p, (start, end) in marks.items():
        if spec.kind == "start":
            pos = start
        elif spec.kind == "end":
            pos = end
        elif spec.kind == "timestamp":
            found = (by_time or {}).get(p, -1)
            pos = end if found < 0 else found
        elif spec.relative:
            pos = end - spec.value
        else:
            pos = spec.value
        out[p] = min(max(pos, start), end)
    return out


def _group_positions(
    cluster: Any, group: str, topic: str, marks: dict[int, tuple[int, int]]
) -> dict[int, int]:
    """partition -> the group's committed offset, for the partitions it has one on (kept inside the log)."""
    from kcompat.client import groups
    from kcompat.client.errors import KafkaError
    from kcompat.wire.error_codes import ErrorCode

    try:
        state = groups.describe_group(cluster, group).state
    except KafkaError as e:
        if e.code != ErrorCode.GROUP_ID_NOT_FOUND:
            raise
        state = "Dead"  # a new group
    if state not in ("Empty", "Dead"):
        # Refused before anything is printed: the broker would refuse the commits of a non-member.
        raise KafkaError(
            ErrorCode.NON_EMPTY_GROUP,
            f"group {group}",
            f"state is {state}; consume -g reads as a standalone consumer, which commits only while "
            "the group has no members",
        )
    committed = groups.committed_offsets(cluster, group)
    out = {}
    for p, (start, end) in marks.items():
        c = committed.get((topic, p))
        if c is not None:
            out[p] = min(max(c, start), end)
    return out


def _commit(cluster: Any, group: str, topic: str, printed: dict[int, int]) -> None:
    """Commit as a standalone consumer (no membership), which the broker accepts while the group
    has no members: what was printed is never printed again by the next `consume -g`."""
    from kcompat.client import groups

    groups.commit_offsets(cluster, group, {(topic, p): o for p, o in printed.items()})


_warned_binary: list[bool] = []


def _warn_binary(view: RecordView, args: argparse.Namespace) -> None:
    """Once: a key or value that is not UTF-8 is printed with \\xNN escapes, and how to get it exactly."""
    if _warned_binary:
        return
    if (args.key_encoding == "text" and not is_text(view.key)) or (
        args.value_encoding == "text" and not is_text(view.value)
    ):
        _warned_binary.append(True)
        fail(
            f"{view.topic}[{view.partition}]@{view.offset} is not UTF-8: its bytes print as \\xNN escapes; "
            "use --key-encoding/--value-encoding hex or base64 for binary data"
        )


def consume(args: argparse.Namespace) -> int:
    from kcompat.client import offsets, records

    as_json = args.output == "json" or args.record_format.strip().lower() == "json"
    pieces = [] if as_json else parse_format(args.record_format)
    spec = parse_offset(args.offset)
    out = sys.stdout
    shown = 0
    progress = Progress(f"consuming {args.topic}", args.num, show_progress())
    try:
        with open_cluster(args) as cluster:
            topic = cluster.topic(args.topic)
            chosen = parse_partitions(args.partitions) or sorted(topic.partitions)
            marks = offsets.watermarks(cluster, topic, chosen)
            by_time = (
                offsets.list_offsets(cluster, topic, spec.value, chosen) if spec.kind == "timestamp" else None
            )
            positions = start_positions(args.offset, marks, by_time)
            if args.group:
                positions.update(_group_positions(cluster, args.group, args.topic, marks))
            printed: dict[int, int] = {}  # partition -> offset after the last record printed
            stops = {p: end for p, (_, end) in marks.items()}
            active = {p for p in positions if args.follow or positions[p] < stops[p]}
            while active and (args.num is None or shown < args.num):
                got, high, after = records.fetch(
                    cluster, topic, {p: positions[p] for p in sorted(active)}, max_wait_ms=args.max_wait_ms
                )
                for r in got:
                    if not args.follow and r.offset >= stops[r.partition]:
                        continue
                    if args.num is not None and shown >= args.num:
                        break
                    view = RecordView(r.topic, r.partition, r.offset, r.timestamp, r.key, r.value, r.headers)
                    if as_json:
                        out.write(
                            json.dumps(record_json(view, args.key_encoding, args.value_encoding)) + "\n"
                        )
                    else:
                        _warn_binary(view, args)
                        out.write(render(pieces, view, args.key_encoding, args.value_encoding))
                    printed[r.partition] = r.offset + 1
                    shown += 1
                    progress.advance(1)
                out.flush()
                if args.group and printed:
                    _commit(cluster, args.group, args.topic, printed)
                    printed = {}
                for p, nxt in after.items():
                    positions[p] = nxt
                    if not args.follow and (nxt >= stops[p] or high.get(p, stops[p]) <= nxt):
                        active.discard(p)
    finally:
        progress.close()
    return 0
