"""`python -m kcompat.client.probe [serve's arguments]`: exit 0 when the broker this environment and
these arguments configure answers on its listener, 1 otherwise (one line on stderr).

The container image's run script waits on it, with the arguments it gives `kcompat serve`, before
printing the start line Testcontainers waits for (`--override listeners=...` moves the port the
probe tries too), and writes the address it found to a file (--write-address) that the image's
HEALTHCHECK probes (--address-file): a health check sees the container's environment, not the
arguments. The configuration is read exactly as `kcompat serve` reads it (file, KAFKA_* variables,
--override), and neither the CLI nor rich is imported: it runs in ~100 ms.

A PLAINTEXT listener is asked ApiVersions; when every listener wants TLS or SASL, an accepted TCP
connection is the answer (the broker binds its listeners once it serves).
"""

from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path

from kcompat.client.connection import Connection
from kcompat.client.errors import CannotConnect, KafkaError
from kcompat.config import ConfigError, load_config

_ANY_INTERFACE = ("", "0.0.0.0", "::")


def _parser() -> argparse.ArgumentParser:
    """serve's arguments (those that take a value too, so theirs is not read as the file) and ours."""
    parser = argparse.ArgumentParser(prog="kcompat.client.probe", add_help=False)
    parser.add_argument("config", nargs="?")
    parser.add_argument("--override", action="append", default=[])
    parser.add_argument("--add-scram", action="append", default=[])
    parser.add_argument("--log-level")
    parser.add_argument("--address-file", help="probe host:port read from this file when it exists")
    parser.add_argument("--write-address", help="write the host:port probed to this file")
    return parser


def probe_address(argv: list[str]) -> tuple[str, int, bool]:
    """(host, port, plaintext) of the listener to probe."""
    args, _ = _parser().parse_known_args(argv)
    if args.address_file and Path(args.address_file).exists():
        host, _, rest = Path(args.address_file).read_text().strip().rpartition(":")
        port, _, protocol = rest.partition(" ")
        return host, int(port), protocol in ("", "PLAINTEXT")
    config = load_config(args.config, args.override, warn=False)
    plain = [x for x in config.listeners if x.security_protocol == "PLAINTEXT"]
    listener = (plain or config.listeners)[0]
    host = "127.0.0.1" if listener.host in _ANY_INTERFACE else listener.host
    if args.write_address:
        Path(args.write_address).write_text(f"{host}:{listener.port} {listener.security_protocol}\n")
    return host, listener.port, bool(plain)


def main(argv: list[str] | None = None) -> int:
    try:
        host, port, plaintext = probe_address(sys.argv[1:] if argv is None else argv)
        if not plaintext:
            socket.create_connection((host, port), timeout=3.0).close()
            return 0
        with Connection(host, port, timeout=3.0, client_id="kcompat-probe"):
            return 0
    except (ConfigError, CannotConnect, KafkaError, OSError, ValueError) as e:
        print(f"kcompat probe: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
