"""Listener addresses: `NAME://host:port`, with `[v6addr]` for IPv6 and an empty host for all
interfaces, and the security protocol each name maps to (listener.security.protocol.map; a name
that is itself a protocol maps to itself, as in Kafka)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from kcompat.config.errors import ConfigError

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

# Kafka's EndPoint takes any name and uppercases it; names with dots are kept (listeners=A.B://:1).
# A bracketed host is an IPv6 address (a zone such as %eth0 included); a plain host has no ':' or '/'.
_LISTENER = re.compile(r"(?P<name>[A-Za-z0-9_.\-]+)://(?P<host>\[[^\]]*\]|[^:\[\]/]*):(?P<port>-?[0-9]+)")


class Listener(NamedTuple):
    name: str
    host: str  # "" means every interface; IPv6 without brackets
    port: int
    # listener.security.protocol.map's protocol for `name`; "" when nothing maps it
    security_protocol: str = "PLAINTEXT"

    def url(self, port: int | None = None) -> str:
        """NAME://host:port, with the bound `port` when given (listeners=...:0 binds a free one)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port if port is None else port}"

    def __str__(self) -> str:
        return self.url()


def parse_listener(key: str, text: str, protocol_map: Mapping[str, str] | None = None) -> Listener:
    m = _LISTENER.fullmatch(text.strip())
    if m is None:
        raise ConfigError(
            f"{key} entry {text!r} is invalid: expected NAME://host:port, e.g. PLAINTEXT://127.0.0.1:9092",
            key=key,
            value=text,
        )
    host = m.group("host")
    if host.startswith("["):
        host = host[1:-1]
    port = int(m.group("port"))
    if not 0 <= port <= 65535:
        raise ConfigError(f"{key} entry {text!r} is invalid: port must be in [0, 65535]", key=key, value=text)
    name = m.group("name").upper()
    protocol = (protocol_map or {}).get(name, name if name in SECURITY_PROTOCOLS else "")
    return Listener(name, host, port, protocol)


def parse_listeners(
    key: str, items: Iterable[str], protocol_map: Mapping[str, str] | None = None
) -> list[Listener]:
    """Every non-empty entry of a listeners-style LIST, each with its mapped security protocol."""
    listeners = [parse_listener(key, item, protocol_map) for item in items if item.strip()]
    names = [listener.name for listener in listeners]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(
            f"{key} names listener {dupes[0]} more than once; each name must be unique", key=key
        )
    return listeners


def parse_protocol_map(key: str, text: str) -> dict[str, str]:
    """listener.security.protocol.map: NAME:PROTOCOL pairs, comma-separated."""
    mapping: dict[str, str] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        protocol = protocol.strip().upper()
        if not sep or not name.strip() or protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"{key} entry {item!r} is invalid: expected NAME:PROTOCOL with PROTOCOL one of "
                f"{', '.join(SECURITY_PROTOCOLS)}",
                key=key,
                value=text,
            )
        mapping[name.strip().upper()] = protocol
    return mapping
