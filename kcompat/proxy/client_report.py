"""The compatibility report: which client software talks through the proxy, which API versions
it uses, and what it asks for that the upstream lacks.

A client names itself in ApiVersions v3+ (KIP-511: ClientSoftwareName/Version; older requests
leave it unknown). Every request then counts against that name: the versions it used of each API
(what it negotiated), and the (API, version) pairs outside the ranges the upstream advertised in
its own ApiVersions answer (unsupported: the upstream will refuse or close). Nothing here does
I/O; the proxy's admin listener renders it as /metrics and GET /proxy/clients.

    report = ClientReport()
    report.request(conn_id, peer, key, version, frame, upstream_ranges)   # every client request
    report.closed(conn_id)
    report.metrics(); report.clients()
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kcompat.wire.errors import DecodeError
from kcompat.wire.messages import APIS
from kcompat.wire.protocol import API_VERSIONS_KEY, UnsupportedRequest, decode_request

UNKNOWN = "unknown"  # a client that sent no ApiVersions v3+ (or no ApiVersions at all)
Software = tuple[str, str]  # (name, version)
# Distinct software names a report keeps (a client sets its own name: bounded, the rest "other").
MAX_SOFTWARE = 200


@dataclass(slots=True)
class _Client:
    """One (software name, software version): what its connections did."""

    open: int = 0
    total: int = 0
    peers: set[str] = field(default_factory=set)
    used: dict[int, set[int]] = field(default_factory=dict)  # api key -> versions requested
    unsupported: Counter[tuple[int, int]] = field(default_factory=Counter)


def api_name(key: int) -> str:
    spec = APIS.get(key)
    return spec.name if spec is not None else f"ApiKey{key}"


def _software(frame: bytes | bytearray) -> Software | None:
    try:
        body = decode_request(frame, strict=False).body
    except (DecodeError, UnsupportedRequest, ValueError):
        return None
    name = str(getattr(body, "client_software_name", "") or "")
    version = str(getattr(body, "client_software_version", "") or "")
    return (name, version) if name else None


class ClientReport:
    def __init__(self) -> None:
        self._by_conn: dict[int, Software] = {}
        self._clients: dict[Software, _Client] = {}
        self.unsupported_total: Counter[tuple[int, int]] = Counter()

    def _client(self, software: Software) -> _Client:
        client = self._clients.get(software)
        if client is None:
            if len(self._clients) >= MAX_SOFTWARE:
                software = ("other", "")
                client = self._clients.setdefault(software, _Client())
            else:
                client = self._clients[software] = _Client()
        return client

    def request(
        self,
        conn_id: int,
        peer: str,
        key: int,
        version: int,
        frame: bytes | bytearray,
        upstream: dict[int, tuple[int, int]],
    ) -> None:
        software = self._by_conn.get(conn_id)
        if key == API_VERSIONS_KEY and version >= 3 and (named := _software(frame)) is not None:
            if software is not None and software != named:
                self._client(software).open -= 1
            if software != named:
                software = named
                self._by_conn[conn_id] = software
                client = self._client(software)
                client.open += 1
                client.total += 1
        if software is None:
            software = self._by_conn[conn_id] = (UNKNOWN, "")
            client = self._client(software)
            client.open += 1
            client.total += 1
        client = self._client(software)
        client.peers.add(peer)
        client.used.setdefault(key, set()).add(version)
        if key != API_VERSIONS_KEY and upstream:  # ApiVersions itself is always answered (KIP-511)
            have = upstream.get(key)
            if have is None or not have[0] <= version <= have[1]:
                client.unsupported[key, version] += 1
                self.unsupported_total[key, version] += 1

    def closed(self, conn_id: int) -> None:
        software = self._by_conn.pop(conn_id, None)
        if software is not None:
            self._client(software).open -= 1

    def clients(self) -> list[dict[str, Any]]:
        return [
            {
                "software_name": name,
                "software_version": version,
                "connections_open": c.open,
                "connections_total": c.total,
                "addresses": sorted(c.peers),
                "api_versions": {api_name(k): sorted(v) for k, v in sorted(c.used.items())},
                "unsupported": [
                    {"api": api_name(k), "api_key": k, "version": v, "count": n}
                    for (k, v), n in sorted(c.unsupported.items())
                ],
            }
            for (name, version), c in sorted(self._clients.items())
        ]

    def metrics(self) -> str:
        lines = [
            "# HELP kcompat_proxy_client_versions Client connections open now, by the software "
            "name and version they sent in ApiVersions (unknown: none sent).",
            "# TYPE kcompat_proxy_client_versions gauge",
        ]
        for (name, version), c in sorted(self._clients.items()):
            lines.append(
                f'kcompat_proxy_client_versions{{software="{_label(name)}",version="{_label(version)}"}} {c.open}'
            )
        lines += [
            "# HELP kcompat_proxy_unsupported_requests_total Requests for an API key or version "
            "the upstream did not advertise in ApiVersions.",
            "# TYPE kcompat_proxy_unsupported_requests_total counter",
        ]
        for (key, api_version), n in sorted(self.unsupported_total.items()):
            lines.append(
                f'kcompat_proxy_unsupported_requests_total{{api="{api_name(key)}",version="{api_version}"}} {n}'
            )
        return "\n".join(lines) + "\n"


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
