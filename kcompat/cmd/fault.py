"""`kcompat fault add|list|clear`: a running broker's fault rules, through its admin listener.

    kcompat fault add error --error NOT_LEADER_OR_FOLLOWER --api Produce --trigger once
    kcompat fault add delay --delay-ms 500 --api Fetch --topic orders
    kcompat fault add --json '{"match": {"api": "EndTxn"}, "action": {"kind": "error", "error": 48}}'
    kcompat fault list [--format json]
    kcompat fault clear [ID ...]            (no ID: every rule)

Triggers: once, always (the default), nth=N, times=N, p=P (with --seed S). The admin listener is
--admin URL, else $KCOMPAT_ADMIN, else http://127.0.0.1:9644; --user/--password when the broker
uses SASL (the admin listener's login).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from kcompat.cmd.common import EXIT_CANNOT_CONNECT, EXIT_OK, EXIT_USAGE, fail, print_json, print_table

ACTIONS = ("error", "delay", "drop", "blackhole", "throttle", "duplicate", "corrupt", "partition")
_MATCHERS = (
    "api",
    "topic",
    "partition",
    "group_id",
    "transactional_id",
    "client_id",
    "principal",
    "peer",
    "broker",
)


def register(commands: Any) -> None:
    fault = commands.add_parser(
        "fault",
        help="add, list and clear fault rules on a running broker",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verbs = fault.add_subparsers(dest="verb", metavar="VERB", required=True)

    p = verbs.add_parser("add", help="add a rule")
    p.add_argument("action", nargs="?", choices=ACTIONS, help="what the rule does")
    p.add_argument("--json", help="the whole rule as JSON (@FILE reads a file, - stdin)")
    for m in _MATCHERS:
        p.add_argument(
            "--" + m.replace("_", "-"), dest=m, action="append", help=f"match this {m} (repeatable)"
        )
    p.add_argument("--versions", help="API versions, e.g. 9+ or 3-8")
    p.add_argument("--error", help="error name or code (action error)")
    p.add_argument("--delay-ms", type=int, help="milliseconds (action delay)")
    p.add_argument("--bytes-per-second", type=int, help="rate (action throttle)")
    p.add_argument("--when", choices=("before", "after"), help="before the handler runs, or after it")
    p.add_argument("--trigger", default="always", help="once, always, nth=N, times=N or p=P")
    p.add_argument("--seed", type=int, default=0, help="seed of a p=P trigger")
    _admin_options(p)
    p.set_defaults(handler=add)

    p = verbs.add_parser("list", help="the rules, their state and how often they fired")
    p.add_argument("--format", choices=("table", "json"), default="table")
    _admin_options(p)
    p.set_defaults(handler=list_rules)

    p = verbs.add_parser("clear", help="remove rules (all of them without an ID)")
    p.add_argument("ids", nargs="*", type=int, metavar="ID")
    _admin_options(p)
    p.set_defaults(handler=clear)


def _admin_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--admin", default=os.environ.get("KCOMPAT_ADMIN", "http://127.0.0.1:9644"), help="admin URL"
    )
    p.add_argument("--user", help="admin listener login (a SASL user)")
    p.add_argument("--password", help="its password")


def _client(args: argparse.Namespace) -> Any:
    from kcompat.fault_client import Faults

    url = args.admin if "://" in args.admin else f"http://{args.admin}"
    return Faults(url, args.user, args.password)


def _call(args: argparse.Namespace, what: Any, client: Any = None) -> int:
    """Run `what(client)` against the admin listener; its refusals and absence as one line.
    `client`: how to make the client from args (default: the fault rules' client)."""
    from kcompat.fault_client import FaultApiError

    try:
        return int(what((client or _client)(args)))
    except FaultApiError as e:
        fail(f"the broker refused: {e}")
        return EXIT_USAGE
    except OSError as e:
        reason = getattr(e, "reason", e)  # urllib wraps the socket's error
        text = getattr(reason, "strerror", None) or str(reason)
        fail(
            f"cannot reach the admin listener at {args.admin} ({text}): is the broker up with admin.listener set?"
        )
        return EXIT_CANNOT_CONNECT


def _trigger(text: str, seed: int) -> Any:
    if text in ("once", "always"):
        return text
    kind, _, value = text.partition("=")
    try:
        if kind in ("nth", "times"):
            return {kind: int(value)}
        if kind in ("p", "probability"):
            return {"probability": float(value), "seed": seed}
    except ValueError:
        pass
    raise ValueError(f"--trigger {text!r}: once, always, nth=N, times=N or p=P")


def _rule(args: argparse.Namespace) -> Any:
    if args.json is not None:
        text = args.json
        if text == "-":
            text = sys.stdin.read()
        elif text.startswith("@"):
            with open(text[1:], encoding="utf-8") as f:
                text = f.read()
        return json.loads(text)
    if args.action is None:
        raise ValueError("give an action (error, delay, drop, ...) or --json RULE")
    match: dict[str, Any] = {}
    for m in _MATCHERS:
        values = getattr(args, m)
        if values:
            typed = [
                int(v) if m in ("partition", "broker") or (m == "api" and v.isdigit()) else v for v in values
            ]
            match[m] = typed[0] if len(typed) == 1 else typed
    if args.versions:
        match["versions"] = args.versions
    action: dict[str, Any] = {"kind": args.action}
    for key in ("error", "delay_ms", "bytes_per_second", "when"):
        value = getattr(args, key)
        if value is not None:
            action[key] = int(value) if key == "error" and value.isdigit() else value
    return {"match": match, "action": action, "trigger": _trigger(args.trigger, args.seed)}


def add(args: argparse.Namespace) -> int:
    try:
        rule = _rule(args)
    except (ValueError, OSError) as e:
        fail(str(e))
        return EXIT_USAGE

    def post(faults: Any) -> int:
        for listed in faults.call("POST", body=rule)["rules"]:
            print(f"added rule {listed['id']}: {_describe(listed)}")
        return EXIT_OK

    return _call(args, post)


def list_rules(args: argparse.Namespace) -> int:
    def show(faults: Any) -> int:
        answer = faults.call("GET")
        if args.format == "json":
            print_json(answer)
        else:
            rows = [(r["id"], r["state"], r["fired"], _describe(r)) for r in answer["rules"]]
            print_table(("ID", "STATE", "FIRED", "RULE"), rows)
        return EXIT_OK

    return _call(args, show)


def clear(args: argparse.Namespace) -> int:
    def remove(faults: Any) -> int:
        if not args.ids:
            print(f"cleared {faults.clear()} rule(s)")
        for rule_id in args.ids:
            faults.remove(rule_id)
            print(f"removed rule {rule_id}")
        return EXIT_OK

    return _call(args, remove)


def _describe(r: dict[str, Any]) -> str:
    action = r["action"]
    what = action["kind"] + (f" {action['error']}" if "error" in action else "")
    what += f" {action['delay_ms']} ms" if "delay_ms" in action else ""
    what += f" {action['bytes_per_second']} B/s" if "bytes_per_second" in action else ""
    match = " ".join(
        f"{k}={','.join(map(str, v)) if isinstance(v, list) else v}" for k, v in r["match"].items()
    )
    trigger = r["trigger"] if isinstance(r["trigger"], str) else json.dumps(r["trigger"])
    return f"{what} ({action['when']}) on {match or 'every request'}, {trigger}"
