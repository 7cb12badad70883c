"""Opening a listener: the parsing of `listeners` (names, hosts, security protocols, controller
listeners) is kcompat.config's, done once at load; this module only binds the result."""

from __future__ import annotations

import socket

from kcompat.config.listeners import Listener


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
