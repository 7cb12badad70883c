"""An in-process Broker on a private event loop, driven with real request frames (no sockets).

h = broker_harness({"auto.create.topics.enable": "false"})   # the fixture (tests/conftest.py)
resp = h.call(METADATA, 12, {"topics": None})      # encode_request -> Broker.handle -> decode
h.restart()                                        # close cleanly and start again on the same dirs
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kcompat.config import BrokerConfig
from kcompat.log.log_file import FetchSlice
from kcompat.server.broker import Broker
from kcompat.wire.protocol import decode_response, encode_request
from kcompat.wire.records import Record, build_batch
from kcompat.wire.schema import Api


def batch(*values: bytes, key: bytes | None = None, ts: int = 1_700_000_000_000, **kw: Any) -> bytes:
    """A v2 batch of records with these values (offsets from 0, timestamps ts, ts+1, ...)."""
    recs = [Record(i, ts + i, key, v) for i, v in enumerate(values)]
    return build_batch(recs, **kw)


def flatten(chunks: list[Any]) -> bytes:
    out = bytearray()
    for c in chunks:
        out += c.read_bytes() if isinstance(c, FetchSlice) else bytes(c)
    return bytes(out)


# `broker_harness(props, kind=BrokerHarness, path=..., **kw)`: the fixture of tests/conftest.py.
HarnessFactory = Callable[..., Any]


class BrokerHarness:
    def __init__(self, tmp_path: Path, props: Mapping[str, str] | None = None, *, clock: Any = None) -> None:
        self.props = {
            "log.dirs": str(tmp_path / "data"),
            "listeners": "PLAINTEXT://127.0.0.1:19092",
            **(props or {}),
        }
        self.clock = clock
        self.loop = asyncio.new_event_loop()
        self.closed = False
        self.correlation = 0
        self.broker = self._start()

    def _start(self) -> Broker:
        cfg = BrokerConfig(self.props)
        broker = Broker(cfg, clock=self.clock) if self.clock else Broker(cfg)
        self.run(broker.start())
        return broker

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def sleep(self, seconds: float) -> None:
        """Run the loop for `seconds`: the `sleep` of kcompat.testing.wait_until for this broker."""
        self.run(asyncio.sleep(seconds))

    def raw(self, frame: bytes) -> list[Any] | None:
        """Broker.handle on a whole frame (size prefix included); the chunks it returned."""
        return self.run(self.broker.handle(memoryview(frame)[4:], None))

    def frame(self, api: Api, version: int, body: Any) -> bytes:
        self.correlation += 1
        return encode_request(api.key, version, self.correlation, body, client_id="test")

    def call(self, api: Api, version: int, body: Any) -> Any:
        frame = self.frame(api, version, body)
        chunks = self.raw(frame)
        assert chunks is not None, "no response"
        data = flatten(chunks)
        assert int.from_bytes(data[:4], "big", signed=True) == len(data) - 4
        correlation, resp = decode_response(api.key, version, data[4:])
        assert correlation == self.correlation
        return resp

    async def call_async(self, api: Api, version: int, body: Any) -> Any:
        frame = self.frame(api, version, body)
        correlation = self.correlation
        chunks = await self.broker.handle(memoryview(frame)[4:], None)
        data = flatten(chunks)
        got, resp = decode_response(api.key, version, data[4:])
        assert got == correlation
        return resp

    def restart(self) -> None:
        self.run(self.broker.close())
        self.broker = self._start()

    def close(self) -> None:
        """Close the broker and the loop (once: the fixture closes what a test left open)."""
        if self.closed:
            return
        self.closed = True
        try:
            self.run(self.broker.close())
        finally:
            self.loop.close()
