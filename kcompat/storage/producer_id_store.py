"""Producer ids for InitProducerId, never handed out twice, even across restarts.

A reused id would be fatal: a new producer given an old id with epoch 0 and sequence 0 would see
its first batch taken for a duplicate of the old producer's batch. Like Kafka's ProducerIdManager,
ids are reserved in blocks: the end of the current block is written durably to
`kcompat-producer-ids` in the first log dir before any id of the block is given out, so after a
crash the next block starts past every id that may have been used.

    file content: one line, the first id not yet reserved ("3000\n")
"""

from __future__ import annotations

from pathlib import Path

from kcompat.log.log_files import atomic_write

FILE_NAME = "kcompat-producer-ids"
BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, directory: Path, *, block_size: int = BLOCK_SIZE, sync: bool = True) -> None:
        self.path = directory / FILE_NAME
        self.block_size = block_size
        self._sync = sync
        self._next = 0
        self._block_end = 0  # exclusive; ids in [_next, _block_end) are reserved and unused

    def load(self) -> None:
        try:
            text = self.path.read_text().strip()
        except FileNotFoundError:
            return
        self._next = self._block_end = int(text)

    def next_id(self) -> int:
        if self._next >= self._block_end:
            self._reserve(self._next + self.block_size)
        pid = self._next
        self._next += 1
        return pid

    def _reserve(self, end: int) -> None:
        atomic_write(self.path, f"{end}\n".encode(), sync=self._sync)
        self._block_end = end
