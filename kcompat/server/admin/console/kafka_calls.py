"""The console's actions as Kafka requests, answered by the broker's own dispatcher.

    KafkaCalls(broker).call(who, api_key, version, body) -> the typed response body

An action is encoded as the request a Kafka client would send and handed to the dispatcher as if
it came from a connection authenticated as the console's user: the same handlers, the same
authorizer decisions (the principal is the session's, the host the browser's address), the same
forwarding to the active controller in cluster mode, the same metrics. Nothing here writes a log
or the metadata directly.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kcompat.log.log_file import FetchSlice
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.protocol import decode_response, encode_request

if TYPE_CHECKING:
    from kcompat.server.broker import Broker

# Kafka's API keys and the versions the console speaks (every one the broker serves, 4.3.1's too).
PRODUCE = (0, 9)
LIST_OFFSETS = (2, 7)
OFFSET_COMMIT = (8, 8)
CREATE_TOPICS = (19, 7)
DELETE_TOPICS = (20, 5)
CREATE_PARTITIONS = (37, 3)
DELETE_GROUPS = (42, 2)
INCREMENTAL_ALTER_CONFIGS = (44, 1)
OFFSET_DELETE = (47, 0)


@dataclass(frozen=True, slots=True)
class ConsoleClient:
    """What the handlers and the authorizer read of a connection, for the console's user."""

    principal: str
    host: str
    listener: str
    connection_id: str = "console"


class CallFailed(Exception):
    """The broker closed the 'connection' rather than answer (a bad request): said by name."""


def error_name(code: int) -> str:
    return ErrorCode.of(code).name


class KafkaCalls:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._correlation = itertools.count(1)
        self._listener = next(iter(broker.config.listener_security), "")

    async def call(self, principal: str, host: str, api: tuple[int, int], body: Mapping[str, Any]) -> Any:
        key, version = api
        correlation = next(self._correlation)
        frame = encode_request(key, version, correlation, body, client_id="kcompat-console")
        client = ConsoleClient(principal, host, self._listener)
        try:  # Broker.handle is the dispatcher's: it raises only CloseConnection
            answer = await self.broker.handle(memoryview(frame)[4:], client)
            if isinstance(answer, asyncio.Future):
                answer = await answer
        except Exception as e:
            raise CallFailed(str(e)) from None
        if answer is None:
            raise CallFailed("no answer")
        data = b"".join(c.read_bytes() if isinstance(c, FetchSlice) else bytes(c) for c in answer)  # type: ignore[call-overload]
        return decode_response(key, version, data[4:])[1]
