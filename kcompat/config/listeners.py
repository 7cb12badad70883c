"""Listener addresses: `NAME://host:port`, with `[v6addr]` for IPv6 and an empty host for all
interfaces, and the security protocol each name maps to."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

from kcompat.config.errors import ConfigError

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

_LISTENER = re.compile(r"(?P<name>[A-Za-z0-9_\-]+)://(?P<host>\[[0-9A-Fa-f:.%a-zA-Z]*\]|[^:\[\]/]*):(?P<port>-?[0-9]+)")


class Listener(NamedTuple):
    name: str
    host: str  # "" means every interface
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


def parse_listener(key: str, text: str) -> Listener:
    m = _LISTENER.fullmatch(text.strip())
    if m is None:
        raise ConfigError(
            f"{key} entry {text!r} is invalid: expected NAME://host:port, e.g. PLAINTEXT://127.0.0.1:9092",
            key=key, value=text,
        )
    host = m.group("host")
    if host.startswith("["):
        host = host[1:-1]
    port = int(m.group("port"))
    if not 0 <= port <= 65535:
        raise ConfigError(f"{key} entry {text!r} is invalid: port must be in [0, 65535]", key=key, value=text)
    return Listener(m.group("name").upper(), host, port)


def parse_listeners(key: str, items: Iterable[str]) -> list[Listener]:
    listeners = [parse_listener(key, item) for item in items if item.strip()]
    names = [listener.name for listener in listeners]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(f"{key} names listener {dupes[0]} more than once; each name must be unique", key=key)
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
                key=key, value=text,
            )
        mapping[name.strip().upper()] = protocol
    return mapping
