"""`kcompat capture start|stop|list|show|clear|replay`: traffic captures on a running broker.

    kcompat capture start --topic orders --client-id billing      records produced and consumed
    kcompat capture start --log traffic.jsonl --full --api Produce  a JSON-lines protocol log
    kcompat capture list [--format json]
    kcompat capture show ID [--format json]      the records (json: replayable as it is)
    kcompat capture stop ID                      stop recording; `clear [ID ...]` forgets them
    kcompat capture replay FILE --bootstrap host:port    a captured produce stream, per partition in order

Matchers are the fault rules' (--api, --versions, --topic, --partition, --group-id,
--transactional-id, --client-id, --principal, --peer, --broker; repeatable). The admin listener
is --admin URL, else $KCOMPAT_ADMIN, else http://127.0.0.1:9644.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from kcompat.cmd.common import EXIT_KAFKA_ERROR, EXIT_OK, EXIT_USAGE, fail, print_json, print_table
from kcompat.cmd.fault import _MATCHERS, _admin_options, _call


def register(commands: Any) -> None:
    cap = commands.add_parser(
        "capture",
        help="capture what clients produce and consume, or every request, on a running broker",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verbs = cap.add_subparsers(dest="verb", metavar="VERB", required=True)

    p = verbs.add_parser("start", help="start a capture; prints its id")
    for m in _MATCHERS:
        p.add_argument(
            "--" + m.replace("_", "-"), dest=m, action="append", help=f"match this {m} (repeatable)"
        )
    p.add_argument("--versions", help="API versions, e.g. 9+ or 3-8")
    p.add_argument("--max-records", type=int, help="records kept at most (default 10000)")
    p.add_argument(
        "--log", metavar="FILE", help="a protocol log instead: this file in the broker's capture dir"
    )
    p.add_argument("--max-bytes", type=int, help="rotate the log at this size (default 10 MiB)")
    p.add_argument("--files", type=int, help="old log files kept (default 3)")
    p.add_argument("--full", action="store_true", help="log record batches in full, records decoded")
    _admin_options(p)
    p.set_defaults(handler=start)

    p = verbs.add_parser("list", help="the captures")
    p.add_argument("--format", choices=("table", "json"), default="table")
    _admin_options(p)
    p.set_defaults(handler=list_captures)

    p = verbs.add_parser("show", help="a capture's records")
    p.add_argument("id", type=int, metavar="ID")
    p.add_argument("--format", choices=("table", "json"), default="table")
    _admin_options(p)
    p.set_defaults(handler=show)

    p = verbs.add_parser("stop", help="stop recording (the records stay)")
    p.add_argument("ids", nargs="+", type=int, metavar="ID")
    _admin_options(p)
    p.set_defaults(handler=stop)

    p = verbs.add_parser("clear", help="forget captures (all of them without an ID)")
    p.add_argument("ids", nargs="*", type=int, metavar="ID")
    _admin_options(p)
    p.set_defaults(handler=clear)

    p = verbs.add_parser("replay", help="produce a captured stream to a cluster")
    p.add_argument("file", metavar="FILE", help="`capture show --format json` output, or a full protocol log")
    p.add_argument("--bootstrap", required=True, help="host:port[,host:port] of the target cluster")
    p.add_argument("--batch", type=int, default=500, help="records per produce request (default 500)")
    p.set_defaults(handler=replay)


def _client(args: argparse.Namespace) -> Any:
    from kcompat.capture_client import Captures

    url = args.admin if "://" in args.admin else f"http://{args.admin}"
    return Captures(url, args.user, args.password)


def _spec(args: argparse.Namespace) -> dict[str, Any]:
    match: dict[str, Any] = {}
    for m in _MATCHERS:
        values = getattr(args, m)
        if values:
            parsed = [
                int(v) if m in ("partition", "broker") and v.lstrip("-").isdigit() else v for v in values
            ]
            match[m] = parsed if len(parsed) > 1 else parsed[0]
    if args.versions:
        match["versions"] = args.versions
    spec: dict[str, Any] = {"match": match}
    if args.log:
        spec.update(kind="log", file=args.log, full=args.full)
        for key in ("max_bytes", "files"):
            if getattr(args, key) is not None:
                spec[key] = getattr(args, key)
    elif args.max_records is not None:
        spec["max_records"] = args.max_records
    return spec


def start(args: argparse.Namespace) -> int:
    def go(c: Any) -> int:
        cid = c.start(_spec(args))
        print(cid)
        return EXIT_OK

    return _call(args, go, _client)


def list_captures(args: argparse.Namespace) -> int:
    def go(c: Any) -> int:
        found = c.list()
        if args.format == "json":
            print_json(found)
            return EXIT_OK
        rows = [
            [
                x["id"],
                x["kind"],
                "running" if x["running"] else "stopped",
                json.dumps(x["match"]),
                x["seen"],
                x.get("captured", x.get("written", 0)),
                x.get("dropped", 0),
                x.get("path", ""),
            ]
            for x in found
        ]
        print_table(["ID", "KIND", "STATE", "MATCH", "SEEN", "KEPT", "DROPPED", "FILE"], rows)
        return EXIT_OK

    return _call(args, go, _client)


def show(args: argparse.Namespace) -> int:
    def go(c: Any) -> int:
        head = c.get(args.id)
        records = c.records(args.id)
        if args.format == "json":
            head["since"] = 0
            head["records"] = records
            print_json(head)
            return EXIT_OK
        rows = [
            [
                r["seq"],
                r["direction"],
                r["client_id"],
                r["topic"],
                r["partition"],
                r["offset"],
                _text(r["key"]),
                _text(r["value"]),
            ]
            for r in records
        ]
        print_table(["SEQ", "DIRECTION", "CLIENT", "TOPIC", "PARTITION", "OFFSET", "KEY", "VALUE"], rows)
        return EXIT_OK

    return _call(args, go, _client)


def _text(v: Any) -> str:
    return "" if v is None else v if isinstance(v, str) else "(base64) " + v["base64"]


def stop(args: argparse.Namespace) -> int:
    def go(c: Any) -> int:
        for cid in args.ids:
            c.stop(cid)
        return EXIT_OK

    return _call(args, go, _client)


def clear(args: argparse.Namespace) -> int:
    def go(c: Any) -> int:
        if not args.ids:
            print(f"{c.clear()} captures removed")
        for cid in args.ids:
            c.remove(cid)
        return EXIT_OK

    return _call(args, go, _client)


def replay(args: argparse.Namespace) -> int:
    from kcompat.capture.replay import ReplayError, read_stream
    from kcompat.capture.replay import replay as run_replay
    from kcompat.client.errors import CannotConnect, KafkaError

    try:
        stream = read_stream(Path(args.file))
    except ReplayError as e:
        fail(str(e))
        return EXIT_USAGE
    except OSError as e:
        fail(f"cannot read {args.file} ({e.strerror}): give the file `capture show --format json` wrote")
        return EXIT_USAGE
    except json.JSONDecodeError as e:
        fail(f"{args.file} is not JSON ({e.msg} at line {e.lineno}): give a capture or a full protocol log")
        return EXIT_USAGE
    except (ValueError, KeyError, TypeError):
        fail(f"{args.file} is not a capture kcompat wrote: give a capture or a full protocol log")
        return EXIT_USAGE
    try:
        sent = run_replay(stream, args.bootstrap, batch=max(1, args.batch))
    except KafkaError as e:
        fail(e.line())
        return EXIT_KAFKA_ERROR
    except CannotConnect as e:
        fail(str(e))
        return 3
    for topic, n in sent.items():
        print(f"{topic}: {n} records replayed")
    return EXIT_OK
