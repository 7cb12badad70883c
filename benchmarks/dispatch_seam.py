"""The dispatcher's cost per request with no fault rule and no capture (the hooks' seam), and with
a capture running: `python -m benchmarks.dispatch_seam`. Metadata v12 for no topic through Broker.handle,
many times in one coroutine, so the figure is the dispatcher's own path (decode, route, encode)."""

from __future__ import annotations

import asyncio
import sys
import tempfile
import timeit
from pathlib import Path
from typing import Any

from kcompat.config import BrokerConfig
from kcompat.server.broker import Broker
from kcompat.wire.protocol import encode_request
from kcompat.wire.types.metadata import MetadataRequest

N = 20_000


def per_request_us(loop: asyncio.AbstractEventLoop, broker: Broker, frame: memoryview) -> float:
    async def many() -> None:
        handle = broker.handle
        for _ in range(N):
            await handle(frame, None)

    best = min(timeit.repeat(lambda: loop.run_until_complete(many()), number=1, repeat=5))
    return best / N * 1e6


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        props = {"log.dirs": str(Path(tmp) / "data"), "listeners": "PLAINTEXT://127.0.0.1:19092"}
        loop = asyncio.new_event_loop()
        broker = Broker(BrokerConfig(props))
        loop.run_until_complete(broker.start())
        body = MetadataRequest(topics=[])  # a small answer: the seam's share is as large as it gets
        frame = memoryview(encode_request(3, 12, 1, body, client_id="bench"))[4:]
        print(f"no fault rule, no capture: {per_request_us(loop, broker, frame):.2f} us/request")
        d: Any = broker.dispatcher
        seam = "d.faults is not None and d.faults.engine.rules"  # before traffic capture
        if hasattr(d, "_tap"):
            seam = "d._tap.on or d._rules"
        n = 2_000_000
        cost = min(timeit.repeat(seam, globals={"d": d}, number=n, repeat=15)) / n * 1e9
        print(f"the seam's test alone ({seam}): {cost:.1f} ns")
        capture: Any = getattr(broker, "captures", None)
        if capture is not None:
            from kcompat.capture import spec_from_json

            cid = capture.start(spec_from_json({"match": {"api": "Produce"}}))
            print(f"a capture of Produce only running: {per_request_us(loop, broker, frame):.2f} us/request")
            capture.remove(cid)
        loop.run_until_complete(broker.close())
        loop.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
