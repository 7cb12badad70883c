"""Listeners: which addresses to accept connections on, parsed the way Kafka parses `listeners`.

    listeners = NAME://host:port[,NAME://host:port...]     e.g. PLAINTEXT://:9092,CONTROLLER://:9093

The name maps to a security protocol through listener.security.protocol.map (a name that is also a
protocol maps to itself). An empty host means every interface; an IPv6 host is written in
brackets. Listeners named in controller.listener.names belong to a KRaft quorum kcompat does not
run, so they are not opened. kcompat speaks PLAINTEXT only: any other protocol is a config error.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kcompat.config.errors import ConfigError

_LISTENER = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+)://(?P<host>\[[^\]]*\]|[^:\[\]]*):(?P<port>-?[0-9]+)$")
_KNOWN_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
SUPPORTED_PROTOCOLS = frozenset({"PLAINTEXT"})


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    security_protocol: str
    host: str  # "" for every interface; IPv6 without brackets
    port: int

    def url(self, port: int | None = None) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port if port is None else port}"


def parse_protocol_map(text: str | Mapping[str, str] | None) -> dict[str, str]:
    if isinstance(text, Mapping):
        return {k.upper(): v.upper() for k, v in text.items()}
    result: dict[str, str] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        if not sep or not name.strip() or not protocol.strip():
            raise ConfigError(
                f"listener.security.protocol.map entry {item!r} is invalid: expected NAME:PROTOCOL",
                key="listener.security.protocol.map",
                value=str(text),
            )
        result[name.strip().upper()] = protocol.strip().upper()
    return result


def parse_listeners(
    value: str | Iterable[str],
    protocol_map: Mapping[str, str] | None = None,
    controller_names: Iterable[str] = (),
    key: str = "listeners",
) -> tuple[list[Listener], list[Listener]]:
    """(listeners to open, controller listeners skipped); ConfigError on anything unusable."""
    items = [s.strip() for s in value.split(",")] if isinstance(value, str) else [str(s).strip() for s in value]
    items = [s for s in items if s]
    protocols = dict(protocol_map or {})
    controllers = {n.strip().upper() for n in controller_names if n.strip()}
    opened: list[Listener] = []
    skipped: list[Listener] = []
    names: set[str] = set()
    for item in items:
        m = _LISTENER.match(item)
        if m is None:
            raise ConfigError(f"{key} entry {item!r} is invalid: expected NAME://host:port", key=key, value=item)
        name = m["name"].upper()
        host = m["host"][1:-1] if m["host"].startswith("[") else m["host"]
        port = int(m["port"])
        if not 0 <= port <= 65535:
            raise ConfigError(f"{key} entry {item!r} has an invalid port {port}", key=key, value=item)
        if name in names:
            raise ConfigError(f"{key} names listener {name} more than once", key=key, value=item)
        names.add(name)
        protocol = protocols.get(name, name if name in _KNOWN_PROTOCOLS else "")
        if name in controllers:  # not opened; Kafka maps an unmapped controller listener to PLAINTEXT
            skipped.append(Listener(name, protocol or "PLAINTEXT", host, port))
            continue
        if not protocol:
            raise ConfigError(
                f"{key} entry {item!r}: listener name {name} has no security protocol in "
                "listener.security.protocol.map",
                key=key,
                value=item,
            )
        listener = Listener(name, protocol, host, port)
        if protocol not in SUPPORTED_PROTOCOLS:
            raise ConfigError(
                f"{key} entry {item!r} uses security protocol {protocol}; kcompat supports PLAINTEXT only",
                key=key,
                value=item,
            )
        opened.append(listener)
    if not opened:
        raise ConfigError(f"{key} has no listener to open", key=key, value=",".join(items))
    return opened, skipped


def bind(listener: Listener, backlog: int) -> socket.socket:
    """A listening, non-blocking socket for `listener` (OSError when the address is unusable)."""
    host = listener.host or "0.0.0.0"
    infos = socket.getaddrinfo(host, listener.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(backlog)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock
