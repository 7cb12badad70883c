"""The `kcompat` command: `kcompat serve [server.properties] [--override key=value ...]`, and the
client nouns (`kcompat topic|produce|consume|group|cluster ...`, kcompat.cmd) that work against any
Kafka-compatible cluster."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import Any

from kcompat import __version__
from kcompat.config import (
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    TOPIC_SYNONYMS,
    BrokerConfig,
    ConfigError,
    load_config,
)
from kcompat.config.definition import render_table

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")

SERVE_DESCRIPTION = """\
Start a kcompat broker. With no arguments it listens on PLAINTEXT://127.0.0.1:9092 and keeps its
data in ./kcompat-data. Properties have Apache Kafka's names, types and defaults, so a Kafka
server.properties works as it is (properties that make no sense for one node are accepted and
ignored)."""

SERVE_EPILOG = """\
where a property's value comes from, lowest precedence first:
  1. built-in defaults (listed below)
  2. the server.properties file given as argument
     (Java properties syntax: key=value or key: value, # and ! comments, \\ continues a line)
  3. KAFKA_* environment variables, named as the apache/kafka container image names them:
     drop KAFKA_, lower-case, '_' -> '.', '__' -> '_', '___' -> '-'
       KAFKA_NUM_PARTITIONS=3            num.partitions=3
       KAFKA_LOG_RETENTION_MS=60000      log.retention.ms=60000
       KAFKA_ADVERTISED_LISTENERS=...    advertised.listeners=...
     (the image's JVM and launcher variables such as KAFKA_HEAP_OPTS and KAFKA_OPTS are not
     properties; CLUSTER_ID sets cluster.id)
  4. --override key=value, repeatable

Unknown properties are logged as warnings and ignored. An invalid value stops start-up with one
line on stderr and exit code 1. SIGTERM or SIGINT shuts the broker down cleanly.

key properties:
  listeners=PLAINTEXT://127.0.0.1:9092  advertised.listeners  node.id=1  log.dirs / log.dir
  num.partitions=1  auto.create.topics.enable=true  log.segment.bytes  log.retention.ms/minutes/hours
  log.retention.bytes  message.max.bytes=1048588  socket.request.max.bytes=104857600
  group.initial.rebalance.delay.ms=3000  offsets.retention.minutes=10080  compression.type=producer

all broker properties and their defaults (`kcompat config-docs` adds documentation and topic configs):
"""


def _defaults_listing() -> str:
    lines = []
    for name in sorted(BROKER_CONFIGS):
        definition = BROKER_CONFIGS[name]
        default = definition.default_text
        shown = "(none)" if default is None else default
        note = "  (ignored)" if definition.ignored else ""
        lines.append(f"  {name}={shown}{note}")
    return "\n".join(lines)


CLIENT_NOUNS = ("topic", "produce", "consume", "group", "cluster", "config", "acl", "user", "profile")
SERVER_COMMANDS = ("serve", "config-docs", "proxy")


def build_parser(with_clients: bool = True) -> argparse.ArgumentParser:
    """The whole command line; with_clients=False leaves out the client nouns, so that `kcompat
    serve` does not pay for building (or importing) what it never uses."""
    parser = argparse.ArgumentParser(
        prog="kcompat", description="A broker that speaks Apache Kafka's wire protocol."
    )
    parser.add_argument("--version", action="version", version=f"kcompat {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    serve = commands.add_parser(
        "serve",
        help="start the broker",
        description=SERVE_DESCRIPTION,
        epilog=SERVE_EPILOG + _defaults_listing(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.add_argument("config", nargs="?", metavar="server.properties", help="properties file to read")
    serve.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="key=value",
        help="set a property, above the file and the environment (repeatable)",
    )
    serve.add_argument(
        "--add-scram",
        action="append",
        default=[],
        metavar="SCRAM-SHA-512=[name=alice,password=secret]",
        help="store a SCRAM credential before accepting clients, in the syntax of kafka-storage format "
        "--add-scram (repeatable; only the salted keys are stored)",
    )
    serve.add_argument(
        "--log-level", choices=LOG_LEVELS, default="INFO", type=str.upper, help="log level (default INFO)"
    )

    _add_proxy(commands)

    docs = commands.add_parser(
        "config-docs",
        help="print every supported property with type, default and documentation",
        description="Print the broker properties and topic configs kcompat supports.",
    )
    docs.add_argument("--topic", action="store_true", help="only the topic-level configs")
    docs.add_argument("--broker", action="store_true", help="only the broker properties")
    if with_clients:
        _add_client_nouns(commands)
        parser.set_defaults(command_parser=parser)  # for `kcompat completion`, which walks it
        from kcompat.cmd import dev_cluster

        dev_cluster.register(commands)
    return parser


PROXY_DESCRIPTION = """\
Start a Kafka protocol proxy in front of any Kafka cluster: clients bootstrap from the proxy's
bootstrap listener and reach upstream node n on port proxy.node.port.base + n; every answer that
names a node is rewritten to the proxy's endpoints. Properties come from an optional file, then
--override key=value; the options below are shorthands for the proxy.* properties."""


def _add_proxy(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    proxy = commands.add_parser(
        "proxy",
        help="start a Kafka protocol proxy in front of a Kafka cluster",
        description=PROXY_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    proxy.add_argument("config", nargs="?", metavar="proxy.properties", help="properties file to read")
    proxy.add_argument("--upstream", metavar="HOST:PORT[,...]", help="proxy.upstream.bootstrap.servers")
    proxy.add_argument(
        "--bootstrap", metavar="HOST:PORT", help="proxy.bootstrap.listener (default 127.0.0.1:9192)"
    )
    proxy.add_argument("--node-port-base", metavar="PORT", help="proxy.node.port.base (default 9193)")
    proxy.add_argument("--advertised-host", metavar="HOST", help="proxy.advertised.host")
    proxy.add_argument("--admin", metavar="HOST:PORT", help="proxy.admin.listener (/faults, /captures)")
    proxy.add_argument(
        "--override", action="append", default=[], metavar="key=value", help="set a property (repeatable)"
    )
    proxy.add_argument(
        "--log-level", choices=LOG_LEVELS, default="INFO", type=str.upper, help="log level (default INFO)"
    )


def _proxy(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    from kcompat.config.proxy_config import load_proxy_config

    shorthands = {
        "proxy.upstream.bootstrap.servers": args.upstream,
        "proxy.bootstrap.listener": args.bootstrap,
        "proxy.node.port.base": args.node_port_base,
        "proxy.advertised.host": args.advertised_host,
        "proxy.admin.listener": args.admin,
    }
    overrides = [f"{k}={v}" for k, v in shorthands.items() if v is not None] + list(args.override)
    try:
        config = load_proxy_config(args.config, overrides)
    except ConfigError as exc:
        print(f"kcompat: invalid configuration: {exc}", file=sys.stderr)
        return 1
    from kcompat.proxy.serve import serve

    return serve(config)


def _add_client_nouns(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    # The noun modules import only the standard library here; the client and rich load when a
    # command runs.
    from kcompat.cmd import (
        acl,
        capture,
        cluster,
        completion,
        config,
        consume,
        fault,
        group,
        produce,
        profile,
        topic,
        user,
    )

    for noun in (
        topic,
        produce,
        consume,
        group,
        cluster,
        config,
        acl,
        user,
        profile,
        completion,
        fault,
        capture,
    ):
        noun.register(commands)


def configure_logging(level: str = "INFO", form: str = "plain") -> None:
    """One line per record on stderr: time, level, logger name, message (as JSON with form="json")."""
    handler = logging.StreamHandler(sys.stderr)
    if form == "json":
        from kcompat.log_lines import JsonFormatter

        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)


def _config_docs(args: argparse.Namespace) -> int:
    both = not (args.topic or args.broker)
    out = []
    if args.broker or both:
        out.append("Broker properties (server.properties, KAFKA_* variables, --override):\n")
        out.append(render_table(list(BROKER_CONFIGS.values())))
    if args.topic or both:
        if out:
            out.append("")
        out.append("Topic configs (CreateTopics, AlterConfigs; default from the broker synonyms listed):\n")
        lines = []
        for line in render_table(list(TOPIC_CONFIGS.values())).splitlines():
            lines.append(line)
            name = (
                line.strip().split(" = ")[0]
                if line.startswith("  ") and not line.startswith("      ")
                else None
            )
            if name in TOPIC_SYNONYMS:
                synonyms = ", ".join(s.broker_name for s in TOPIC_SYNONYMS[name])
                lines.append(f"      broker synonyms: {synonyms}")
        out.append("\n".join(lines))
    print("\n".join(out))
    return 0


def _serve(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    try:
        config = load_config(args.config, args.override)
    except ConfigError as exc:
        print(f"kcompat: invalid configuration: {exc}", file=sys.stderr)
        return 1
    if config.get("log.format") == "json":
        configure_logging(args.log_level, "json")
    from kcompat.storage.scram_credentials import parse_add_scram

    try:
        scram_users = [parse_add_scram(text) for text in args.add_scram]
    except ValueError as exc:
        print(f"kcompat: {exc}", file=sys.stderr)
        return 1
    return run_server(config, scram_users)


def run_server(config: BrokerConfig, scram_users: Sequence[Any] = ()) -> int:
    """Hand the configuration to the server (imported here so that the CLI's help and config
    checks work without loading it)."""
    try:
        from kcompat.server import serve
    except ModuleNotFoundError as exc:
        if exc.name != "kcompat.server.serve":
            raise
        print("kcompat: the broker server (kcompat.server.serve) is not part of this build", file=sys.stderr)
        return 1
    try:
        return int(serve.serve(config, scram_users) if scram_users else serve.serve(config))
    except ConfigError as exc:
        print(f"kcompat: invalid configuration: {exc}", file=sys.stderr)
        return 1


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(with_clients=not (words and words[0] in SERVER_COMMANDS))
    args = parser.parse_args(words)
    if getattr(args, "handler", None) is not None:
        from kcompat.cmd.common import run

        return run(args.handler, args)
    if args.command == "serve":
        return _serve(args)
    if args.command == "proxy":
        return _proxy(args)
    if args.command == "config-docs":
        return _config_docs(args)
    if args.command == "dev-cluster":
        from kcompat.cmd import dev_cluster

        return dev_cluster.run(args)
    parser.print_help(sys.stderr)
    return 2
