"""The Kafka wire protocol as pure functions over bytes: no sockets, files, clocks or event loops.

Everything here takes bytes (or memoryviews) in and gives bytes (or chunk lists) out, so it is
tested without a network and reused by the server, the log and the tools alike.
"""

from kcompat.wire.errors import DecodeError

__all__ = ["DecodeError"]
