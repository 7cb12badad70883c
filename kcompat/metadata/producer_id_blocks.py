"""Producer ids in blocks from the controller (Kafka's RPCProducerIdManager, KIP-730), sans-IO.

In cluster mode no broker may hand out an id another broker could also give: the controller owns
the id space and gives each broker a block [start, start + length) with AllocateProducerIds (key 67),
recording it in __cluster_metadata (ProducerIdsRecord). This is the block bookkeeping; the caller
sends the request when told to and reports the answer.

    next_id(now) ──► (id, send)     id from the current block, or None while there is none
                                    send: ask for the next block now (at most one request in flight)
    on_block(start, length)         the controller's answer: becomes the next block
    on_failure(now)                 no block this time: ask again after RETRY_BACKOFF_MS

As Kafka does: the next block is asked for once 90% of the current one is given out, so a busy
broker rarely waits; with no block at all an InitProducerId gets COORDINATOR_LOAD_IN_PROGRESS
(retriable) from the caller, and the first id of a broker's life comes after one round trip.
"""

from __future__ import annotations

from dataclasses import dataclass

PREFETCH_THRESHOLD = 0.90
RETRY_BACKOFF_MS = 50


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    start: int
    length: int

    @property
    def end(self) -> int:
        """Exclusive."""
        return self.start + self.length

    @property
    def prefetch_at(self) -> int:
        """The id from which the next block is asked for."""
        return self.start + int(self.length * PREFETCH_THRESHOLD)


class ProducerIdBlocks:
    def __init__(self) -> None:
        self.current: ProducerIdBlock | None = None
        self.next_block: ProducerIdBlock | None = None
        self.in_flight = False
        self._next = 0
        self._retry_at_ms = 0

    def next_id(self, now_ms: int) -> tuple[int | None, bool]:
        """(an id or None, whether to send AllocateProducerIds now)."""
        if (self.current is None or self._next >= self.current.end) and self.next_block is not None:
            self.current, self.next_block = self.next_block, None
            self._next = self.current.start
        if self.current is not None and self._next < self.current.end:
            pid = self._next
            self._next += 1
            return pid, pid >= self.current.prefetch_at and self._start_request(now_ms)
        return None, self._start_request(now_ms)

    def _start_request(self, now_ms: int) -> bool:
        if self.next_block is not None or self.in_flight or now_ms < self._retry_at_ms:
            return False
        self.in_flight = True
        return True

    def on_block(self, start: int, length: int) -> bool:
        """The controller's block; False (and treated as a failure by the caller) if it is not one."""
        self.in_flight = False
        if start < 0 or length <= 0 or start + length > 2**63 - 1:
            return False
        self.next_block = ProducerIdBlock(start, length)
        return True

    def on_failure(self, now_ms: int) -> None:
        self.in_flight = False
        self._retry_at_ms = now_ms + RETRY_BACKOFF_MS
