"""`max.connections.per.ip.overrides` as Kafka parses it (CoreUtils.parseCsvMap): `host:count`
pairs separated by commas, the count after the last colon (so an IPv6 address may be a host), each
host compared as an address where it is one."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from functools import lru_cache
from types import MappingProxyType

__all__ = ["address", "ip_overrides", "valid_ip_overrides"]


def address(host: str) -> str:
    """One spelling per address ("::1" and "0:0::1" alike); a host name stays as written."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host


@lru_cache(maxsize=8)
def ip_overrides(raw: str) -> Mapping[str, int]:
    """host -> most connections; ValueError on a malformed pair or count."""
    out: dict[str, int] = {}
    for pair in raw.split(","):
        pair = pair.strip()
        if not pair:
            continue
        host, sep, count = pair.rpartition(":")
        if not sep or not host.strip():
            raise ValueError(pair)
        n = int(count.strip())
        if n < 0:
            raise ValueError(pair)
        out[address(host.strip())] = n
    return MappingProxyType(out)


def valid_ip_overrides(raw: object) -> bool:
    try:
        ip_overrides(str(raw))
    except ValueError:
        return False
    return True
