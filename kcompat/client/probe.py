"""`python -m kcompat.client.probe [server.properties]`: exit 0 when the broker this environment
configures answers ApiVersions on its first listener, 1 otherwise (one line on stderr).

The container image's run script waits on it before printing the start line Testcontainers waits
for, and its HEALTHCHECK runs it. It reads the configuration exactly as `kcompat serve` does
(file, KAFKA_* variables), so it probes the port the broker really listens on, and imports neither
the CLI nor rich: it runs in ~100 ms.
"""

from __future__ import annotations

import sys

from kcompat.client.connection import Connection
from kcompat.client.errors import CannotConnect, KafkaError
from kcompat.config import ConfigError, load_config

_ANY_INTERFACE = ("", "0.0.0.0", "::")


def probe_address(argv: list[str]) -> tuple[str, int]:
    config = load_config(argv[0] if argv else None, warn=False)
    listener = config.listeners[0]
    host = "127.0.0.1" if listener.host in _ANY_INTERFACE else listener.host
    return host, listener.port


def main(argv: list[str] | None = None) -> int:
    try:
        host, port = probe_address(sys.argv[1:] if argv is None else argv)
        with Connection(host, port, timeout=3.0, client_id="kcompat-probe"):
            return 0
    except (ConfigError, CannotConnect, KafkaError) as e:
        print(f"kcompat probe: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
