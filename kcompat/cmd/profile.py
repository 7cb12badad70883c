"""`kcompat profile create|use|list|show|delete`: named connection settings, as rpk's profiles.

A profile stores what the connection flags and -X say (brokers, TLS files, SASL mechanism, user,
password, timeout) in the profiles file (kcompat.cmd.settings names where). `create` makes the new
profile the current one; every command then connects with it unless --profile, KCOMPAT_PROFILE,
KCOMPAT_* variables, -X or flags say otherwise (each above the one before).
"""

from __future__ import annotations

import argparse
from typing import Any

from kcompat.cmd.common import add_connection_options, add_output_option, print_json, print_table
from kcompat.cmd.formats import FormatError
from kcompat.cmd.settings import SECRET, flag_settings, load_profiles, parse_x, save_profiles, typed


def register(commands: Any) -> None:
    profile = commands.add_parser(
        "profile",
        help="named connection settings (brokers, TLS, SASL)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verbs = profile.add_subparsers(dest="verb", metavar="VERB", required=True)

    p = verbs.add_parser("create", help="store a profile from the connection flags and -X, and use it")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--force", action="store_true", help="replace a profile of that name")
    p.add_argument("--no-use", action="store_true", help="keep the current profile current")
    add_connection_options(p, output=False)
    p.set_defaults(handler=create)

    p = verbs.add_parser("use", help="make a profile the current one")
    p.add_argument("name", metavar="NAME")
    p.set_defaults(handler=use)

    p = verbs.add_parser("list", help="list profiles; * marks the current one")
    add_output_option(p)
    p.set_defaults(handler=list_profiles)

    p = verbs.add_parser("show", help="a profile's settings (secrets hidden)")
    p.add_argument("name", nargs="?", metavar="NAME", help="default: the current profile")
    add_output_option(p)
    p.set_defaults(handler=show)

    p = verbs.add_parser("delete", help="delete a profile")
    p.add_argument("name", metavar="NAME")
    p.set_defaults(handler=delete)


def create(args: argparse.Namespace) -> int:
    current, profiles = load_profiles()
    if args.name in profiles and not args.force:
        raise FormatError(f"profile {args.name} exists: add --force to replace it")
    values: dict[str, Any] = {**parse_x(args.x_options), **flag_settings(args)}
    if args.profile:
        raise FormatError("profile create takes its settings from flags and -X, not --profile")
    profiles[args.name] = {k: typed(k, v) for k, v in values.items() if typed(k, v) is not None}
    path = save_profiles(current if args.no_use else args.name, profiles)
    print(f"created profile {args.name} in {path}" + ("" if args.no_use else " (now current)"))
    return 0


def use(args: argparse.Namespace) -> int:
    _, profiles = load_profiles()
    _known(args.name, profiles)
    save_profiles(args.name, profiles)
    print(f"using profile {args.name}")
    return 0


def list_profiles(args: argparse.Namespace) -> int:
    current, profiles = load_profiles()
    rows = [
        {"profile": n, "current": n == current, "brokers": profiles[n].get("brokers")}
        for n in sorted(profiles)
    ]
    if args.format == "json":
        print_json(rows)
    elif rows:
        print_table(
            ("PROFILE", "BROKERS"),
            [(f"{'*' if r['current'] else ' '} {r['profile']}", r["brokers"]) for r in rows],
        )
    else:
        print("no profiles yet: kcompat profile create NAME --brokers HOST:PORT ...")
    return 0


def show(args: argparse.Namespace) -> int:
    current, profiles = load_profiles()
    name = args.name or current
    if name is None:
        raise FormatError("no current profile: name one, or create one with kcompat profile create")
    _known(name, profiles)
    shown = {k: ("*****" if k in SECRET else v) for k, v in sorted(profiles[name].items())}
    if args.format == "json":
        print_json({"profile": name, "current": name == current, "settings": shown})
    else:
        print(f"profile {name}" + (" (current)" if name == current else ""))
        for k, v in shown.items():
            print(f"  {k}={str(v).lower() if isinstance(v, bool) else v}")
    return 0


def delete(args: argparse.Namespace) -> int:
    current, profiles = load_profiles()
    _known(args.name, profiles)
    del profiles[args.name]
    save_profiles(None if current == args.name else current, profiles)
    print(f"deleted profile {args.name}")
    return 0


def _known(name: str, profiles: dict[str, Any]) -> None:
    if name not in profiles:
        known = ", ".join(sorted(profiles)) or "none yet"
        raise FormatError(f"no profile {name} (profiles: {known})")
