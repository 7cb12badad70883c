"""SNI routing: one TLS port for every node, the node named by the TLS server name the client
asks for (Kroxylicious' sniHostIdentifiesNode). With proxy.sni.host.pattern
`broker-$(nodeId).example.com`, node 3 is advertised as broker-3.example.com on the bootstrap
listener's port; a connection whose server name matches the pattern goes to that node, any other
(the bootstrap name, or none) to the bootstrap servers. Clients must resolve those names to the
proxy (a wildcard DNS record, or a hosts file) and trust a certificate that names them.
"""

from __future__ import annotations

import re
import ssl
from typing import Any

NODE_ID = "$(nodeId)"
_ATTR = "kcompat_sni"  # the server name, kept on the connection's SSLObject by the callback


class SniPattern:
    __slots__ = ("_regex", "pattern")

    def __init__(self, pattern: str) -> None:
        if pattern.count(NODE_ID) != 1:
            raise ValueError(f"{pattern!r} must contain {NODE_ID} once")
        self.pattern = pattern
        before, after = pattern.split(NODE_ID)
        self._regex = re.compile(re.escape(before) + r"(\d{1,9})" + re.escape(after) + r"\.?", re.IGNORECASE)

    def host(self, node_id: int) -> str:
        return self.pattern.replace(NODE_ID, str(node_id))

    def node_id(self, server_name: str | None) -> int | None:
        """The node a server name names; None: the bootstrap (another name, or no SNI)."""
        if not server_name:
            return None
        m = self._regex.fullmatch(server_name)
        return int(m.group(1)) if m else None


def remember_server_name(context: ssl.SSLContext) -> None:
    """Keep each connection's TLS server name where server_name() finds it."""

    def callback(ssl_object: Any, server_name: str | None, _: ssl.SSLContext) -> None:
        setattr(ssl_object, _ATTR, server_name)

    context.sni_callback = callback


def server_name(ssl_object: Any) -> str | None:
    return getattr(ssl_object, _ATTR, None) if ssl_object is not None else None
