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

from kcompat.cmd.common import Progress, add_connection_options, open_cluster, show_progress
from kcompat.cmd.formats import RecordView, parse_format, parse_offset, parse_partitions, record_json, render


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
    p.add_argument("-f", "--format", default="%v\\n", help="record format string, or json (default '%%v\\n')")
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


def consume(args: argparse.Namespace) -> int:
    from kcompat.client import offsets, records

    as_json = args.format.strip().lower() == "json"
    pieces = [] if as_json else parse_format(args.format)
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
                    out.write(json.dumps(record_json(view)) + "\n" if as_json else render(pieces, view))
                    shown += 1
                    progress.advance(1)
                out.flush()
                for p, nxt in after.items():
                    positions[p] = nxt
                    if not args.follow and (nxt >= stops[p] or high.get(p, stops[p]) <= nxt):
                        active.discard(p)
    finally:
        progress.close()
    return 0
