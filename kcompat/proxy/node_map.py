"""Upstream node id -> upstream address, and node id -> the proxy's endpoint for it (port-based:
`proxy.node.port.base + node id` on the advertised host, as Kroxylicious' portIdentifiesNode; or,
with SNI routing, the pattern's host name for the node on the bootstrap port).

Learnt from every answer that names a broker and from the periodic Metadata refresh; a node id
seen for the first time gets its listener (the `on_new` callback). An id keeps its endpoint for
the proxy's life, so clients' cached addresses stay valid across upstream restarts and moves.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kcompat.proxy.sni import SniPattern

log = logging.getLogger("kcompat.proxy")


class NodeMap:
    def __init__(
        self,
        advertised_host: str,
        port_base: int,
        id_max: int,
        on_new: Callable[[int], None],
        sni: tuple[SniPattern, int] | None = None,
    ) -> None:
        self.advertised_host = advertised_host
        self.sni = sni  # SNI routing: (the host pattern, the one port every node shares)
        self.port_base = port_base
        self.id_max = id_max
        self._on_new = on_new
        self._upstream: dict[int, tuple[str, int]] = {}
        self._refused: set[int] = set()

    def learn(self, node_id: int, host: str, port: int) -> None:
        if node_id > self.id_max:
            if node_id not in self._refused:
                self._refused.add(node_id)
                log.warning(
                    "upstream node %d is above proxy.node.id.max=%d and is not served: raise "
                    "proxy.node.id.max (keeping proxy.node.port.base + it under 65536)",
                    node_id,
                    self.id_max,
                )
            return
        old = self._upstream.get(node_id)
        if old == (host, port):
            return
        self._upstream[node_id] = (host, port)
        log.info(
            "upstream node %d is at %s:%d, served on %s:%d", node_id, host, port, *self.endpoint(node_id)
        )
        if old is None:
            self._on_new(node_id)

    def endpoint(self, node_id: int) -> tuple[str, int]:
        if self.sni is not None:
            pattern, port = self.sni
            return pattern.host(node_id), port
        return self.advertised_host, self.port_base + node_id

    def address(self, node_id: int) -> tuple[str, int] | None:
        return self._upstream.get(node_id)

    def upstream_addresses(self) -> set[tuple[str, int]]:
        return set(self._upstream.values())

    def node_ids(self) -> list[int]:
        return sorted(self._upstream)
