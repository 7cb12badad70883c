"""A JSON-lines file written by a thread of its own, fed through a bounded queue.

The broker's loop only puts a line on the queue; when the queue is full (the disk is slower than
the traffic) the line is dropped and counted, never waited for. The file is rotated when it would
grow past max_bytes: FILE -> FILE.1 -> FILE.2 ... up to `files` old files (0: truncate in place).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger("kcompat.capture")
QUEUE_LINES = 10_000
_STOP = object()


class JsonLinesWriter:
    def __init__(
        self, path: Path, max_bytes: int, files: int, queue_lines: int = QUEUE_LINES, *, start: bool = True
    ) -> None:
        """`start` False: the thread waits for start() (a test fills the queue first)."""
        self.path = path
        self.max_bytes = max_bytes
        self.files = files
        self.written = 0  # lines
        self.dropped = 0
        self.rotations = 0
        self._queue: queue.Queue[Any] = queue.Queue(queue_lines)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(path, "ab")  # noqa: SIM115  (closed by the writer thread)
        self._size = self._file.tell()
        self._thread = threading.Thread(target=self._run, name=f"capture {path.name}", daemon=True)
        if start:
            self._thread.start()

    def start(self) -> None:
        self._thread.start()

    def put(self, entry: dict[str, Any]) -> None:
        try:
            self._queue.put_nowait(entry)
        except queue.Full:
            self.dropped += 1

    def close(self, timeout: float = 5.0) -> None:
        """Write what is queued, then close (the queue may be full: wait for room for the stop)."""
        with contextlib.suppress(queue.Full):
            self._queue.put(_STOP, timeout=timeout)
        self._thread.join(timeout)

    def _run(self) -> None:
        failed = False
        while True:
            entry = self._queue.get()
            if entry is _STOP:
                break
            line = json.dumps(entry, separators=(",", ":")).encode() + b"\n"
            try:
                if self._size and self._size + len(line) > self.max_bytes:
                    self._rotate()
                self._file.write(line)
                self._size += len(line)
                self.written += 1
                if self._queue.empty():
                    self._file.flush()
            except OSError as e:
                self.dropped += 1
                if not failed:
                    log.error(
                        "capture file %s cannot be written (%s): lines are dropped", self.path, e.strerror
                    )
                    failed = True
        self._file.close()

    def _rotate(self) -> None:
        self._file.close()
        if self.files > 0:
            for n in range(self.files - 1, 0, -1):
                older = self.path.with_name(f"{self.path.name}.{n}")
                if older.exists():
                    os.replace(older, self.path.with_name(f"{self.path.name}.{n + 1}"))
            os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))
        self._file = open(self.path, "wb")  # noqa: SIM115
        self._size = 0
        self.rotations += 1
