"""What every client command shares: connection options, exit codes, errors and output.

Exit codes (README "The kcompat CLI"):
    0  done
    1  the cluster answered with a Kafka error (its name is printed, e.g. UNKNOWN_TOPIC_OR_PARTITION)
    2  usage: a bad option, format string, offset or key=value
    3  no broker could be reached (refused, timed out, connection lost)

Errors are one line on stderr: `kcompat: <what>: <KAFKA_ERROR_NAME> (<broker's message>)`.
Tables use rich, imported only when a command prints one.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from kcompat.cmd.formats import FormatError
from kcompat.cmd.settings import BOOTSTRAP_ENV, resolve

EXIT_OK = 0
EXIT_KAFKA_ERROR = 1
EXIT_USAGE = 2
EXIT_CANNOT_CONNECT = 3
BROKERS_ENV = BOOTSTRAP_ENV
DEFAULT_BROKERS = "127.0.0.1:9092"

Handler = Callable[[argparse.Namespace], int]


def add_connection_options(parser: argparse.ArgumentParser, *, output: bool = True) -> None:
    """Where and how to connect (kcompat.cmd.settings), and --format text|json when asked."""
    group = parser.add_argument_group("connection (also -X KEY=VALUE, KCOMPAT_* variables, profiles)")
    group.add_argument(
        "--brokers",
        "-b",
        "--bootstrap-server",
        dest="brokers",
        metavar="HOST:PORT,...",
        help=f"bootstrap brokers (default ${BROKERS_ENV}, the profile's, or {DEFAULT_BROKERS})",
    )
    group.add_argument(
        "-X",
        dest="x_options",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="rpk-style setting: brokers, timeout, tls.enabled, tls.ca, tls.cert, tls.key, "
        "tls.insecure_skip_verify, sasl.mechanism, user, pass, sasl.token",
    )
    group.add_argument("--profile", metavar="NAME", help="connection profile (default: the current one)")
    group.add_argument(
        "--timeout", type=float, default=None, metavar="SECONDS", help="request timeout (default 10)"
    )
    group.add_argument("--tls", action="store_true", default=None, help="connect with TLS")
    group.add_argument("--cacert", "--tls-ca", dest="cacert", metavar="PEM", help="CA file (implies --tls)")
    group.add_argument("--tls-cert", metavar="PEM", help="client certificate for mTLS (implies --tls)")
    group.add_argument("--tls-key", metavar="PEM", help="the client certificate's key")
    group.add_argument(
        "--sasl-mechanism",
        metavar="MECHANISM",
        help="PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (an unsecured JWT for --user)",
    )
    group.add_argument("--user", metavar="NAME", help="SASL user")
    group.add_argument("--password", metavar="SECRET", help="SASL password")
    if output:
        add_output_option(parser)


def add_output_option(parser: argparse.ArgumentParser) -> None:
    """-o/--output text|json everywhere; --format keeps working where it meant the same."""
    parser.add_argument(
        "--output",
        "--format",
        dest="format",
        choices=("text", "json"),
        default="text",
        help="text tables for people, json for scripts",
    )


def deprecated(new: str) -> type[argparse.Action]:
    """An option spelling kept for old scripts: it works, and says once on stderr what to type now."""

    class Deprecated(argparse.Action):
        def __call__(self, parser: Any, namespace: Any, values: Any, option: str | None = None) -> None:
            fail(f"{option} is deprecated here; use {new}")
            setattr(namespace, self.dest, values)

    return Deprecated


def connection_settings(args: argparse.Namespace) -> tuple[str, float]:
    """(brokers, timeout) as the command would connect."""
    s = resolve(args)
    return s.brokers, s.timeout


def open_cluster(args: argparse.Namespace) -> Any:
    from kcompat.client.cluster import Cluster

    s = resolve(args)
    try:
        return Cluster(s.brokers, timeout=s.timeout, security=s.security)
    except ValueError as e:
        raise FormatError(str(e)) from None


def run(handler: Handler, args: argparse.Namespace) -> int:
    """Run a command, turning the ways it can fail into one stderr line and an exit code."""
    from kcompat.client.errors import CannotConnect, KafkaError

    try:
        return handler(args)
    except FormatError as e:
        fail(str(e))
        return EXIT_USAGE
    except KafkaError as e:
        fail_kafka(e)
        return EXIT_KAFKA_ERROR
    except CannotConnect as e:
        fail(str(e))
        return EXIT_CANNOT_CONNECT
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `kcompat consume t | head`: the reader left; say nothing, as other Unix tools do.
        sys.stderr.close()
        return EXIT_OK


def fail(line: str) -> None:
    print(f"kcompat: {line}", file=sys.stderr)


# What to do next, by Kafka error name: appended to the one error line.
HINTS = {
    "UNKNOWN_TOPIC_OR_PARTITION": "kcompat topic list shows the topics",
    "GROUP_ID_NOT_FOUND": "kcompat group list shows the groups",
    "NON_EMPTY_GROUP": "stop the group's consumers first (kcompat group describe lists them)",
    "TOPIC_AUTHORIZATION_FAILED": "the principal has no ACL for this topic (kcompat acl list --topic NAME)",
    "GROUP_AUTHORIZATION_FAILED": "the principal has no ACL for this group (kcompat acl list --group NAME)",
    "CLUSTER_AUTHORIZATION_FAILED": "the principal has no ACL on the cluster (kcompat acl list --cluster)",
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": "the principal has no ACL for this transactional id",
    "SECURITY_DISABLED": "the broker has no authorizer or SASL users configured for this",
    "INVALID_REPLICATION_FACTOR": "a single broker takes --replicas 1",
    "INVALID_CONFIG": "kcompat config-docs --topic lists the topic configs and their ranges",
    "RESOURCE_NOT_FOUND": "check the name: kcompat cluster info lists broker ids, kcompat topic list topics",
}


def fail_kafka(error: Any) -> None:
    """One line: what was done, Kafka's error name, the broker's message, and what to do next."""
    hint = HINTS.get(error.name)
    fail(error.line() + (f"; hint: {hint}" if hint else ""))


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=False, default=str))


def print_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], *, title: str | None = None) -> None:
    """Columns aligned for people; no borders, so the output pastes cleanly and greps well."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, title=title, title_justify="left")
    for name in columns:
        table.add_column(name, overflow="fold")
    for row in rows:
        table.add_row(*("-" if v is None else str(v) for v in row))
    # A wide virtual terminal when piped, so a table is never wrapped at 80 columns in a file;
    # rich pads every cell, so trailing blanks are cut before the lines are written.
    console = Console(width=None if sys.stdout.isatty() else 250, highlight=False, soft_wrap=False)
    with console.capture() as captured:
        console.print(table)
    sys.stdout.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))


def print_pairs(pairs: Sequence[tuple[str, Any]]) -> None:
    width = max((len(k) for k, _ in pairs), default=0)
    for k, v in pairs:
        print(f"{k.ljust(width)}  {'-' if v is None else v}")


def show_progress(stream: Any = None) -> bool:
    """A progress bar only for people: when stderr (where it is drawn) is a terminal."""
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class Progress:
    """A rich progress bar on stderr when it is a terminal, else nothing at all."""

    def __init__(self, description: str, total: int | None, enabled: bool) -> None:
        self._bar: Any = None
        self._task: Any = None
        if enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._task = self._bar.add_task(description, total=total)
            self._bar.start()

    def advance(self, n: int) -> None:
        if self._bar is not None:
            self._bar.advance(self._task, n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
