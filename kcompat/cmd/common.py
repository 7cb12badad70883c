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
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from kcompat.cmd.formats import FormatError

EXIT_OK = 0
EXIT_KAFKA_ERROR = 1
EXIT_USAGE = 2
EXIT_CANNOT_CONNECT = 3
BROKERS_ENV = "KCOMPAT_BROKERS"
DEFAULT_BROKERS = "127.0.0.1:9092"

Handler = Callable[[argparse.Namespace], int]


def add_connection_options(parser: argparse.ArgumentParser, *, output: bool = True) -> None:
    """--brokers / -X brokers=... / KCOMPAT_BROKERS, --timeout, and --format text|json when asked."""
    group = parser.add_argument_group("connection")
    group.add_argument(
        "--brokers",
        "-b",
        metavar="HOST:PORT,...",
        help=f"bootstrap brokers (default ${BROKERS_ENV} or {DEFAULT_BROKERS})",
    )
    group.add_argument(
        "-X",
        dest="x_options",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="rpk-style setting: brokers=HOST:PORT,... or timeout=SECONDS",
    )
    group.add_argument(
        "--timeout", type=float, default=None, metavar="SECONDS", help="request timeout (default 10)"
    )
    if output:
        parser.add_argument(
            "--format",
            choices=("text", "json"),
            default="text",
            help="text tables for people, json for scripts",
        )


def connection_settings(args: argparse.Namespace) -> tuple[str, float]:
    """(brokers, timeout) from the options, -X settings and the environment, options first."""
    x: dict[str, str] = {}
    for item in getattr(args, "x_options", []):
        key, sep, value = item.partition("=")
        if not sep:
            raise FormatError(f"-X {item!r} is not of the form key=value")
        key = key.strip().lower()
        if key not in ("brokers", "timeout"):
            raise FormatError(f"-X {key}: known settings are brokers and timeout")
        x[key] = value.strip()
    brokers = args.brokers or x.get("brokers") or os.environ.get(BROKERS_ENV) or DEFAULT_BROKERS
    timeout = args.timeout
    if timeout is None:
        try:
            timeout = float(x.get("timeout", "10"))
        except ValueError:
            raise FormatError(f"-X timeout={x['timeout']!r} is not a number of seconds") from None
    if timeout <= 0:
        raise FormatError("the timeout must be positive")
    return brokers, timeout


def open_cluster(args: argparse.Namespace) -> Any:
    from kcompat.client.cluster import Cluster

    brokers, timeout = connection_settings(args)
    try:
        return Cluster(brokers, timeout=timeout)
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
        fail(e.line())
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
