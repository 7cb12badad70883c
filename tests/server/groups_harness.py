"""Helpers for the group tests: a BrokerHarness with a settable clock and concurrent requests.

h = GroupHarness(tmp_path)                      # fake clock at FakeClock.start, initial delay 0
a, b = h.together(join(h, "g"), join(h, "g"))  # requests in flight at once, as from two connections
h.advance(10_000)                               # move the clock and fire the coordinator's timers
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any, TypeVar

from kcompat.coordinator.consumer_protocol import encode_subscription
from kcompat.wire.messages.create_topics import CREATE_TOPICS
from kcompat.wire.messages.heartbeat import HEARTBEAT
from kcompat.wire.messages.join_group import JOIN_GROUP
from kcompat.wire.messages.sync_group import SYNC_GROUP
from kcompat.wire.schema import Api
from tests.server.broker_harness import BrokerHarness

T = TypeVar("T")


class FakeClock:
    start = 1_700_000_000.0

    def __init__(self) -> None:
        self.now = self.start

    def __call__(self) -> float:
        return self.now


class ShardsClock:
    """The monotonic clock (seconds) of a coordinator's shards (CoordinatorShards(clock=...)). Within
    `timing_out(call)` every reading is a minute later, so a wait for replication times out at once
    instead of after the coordinator's timeout in real time."""

    def __init__(self) -> None:
        self.now = 0.0
        self.step = 0.0

    def __call__(self) -> float:
        self.now += self.step
        return self.now

    def timing_out(self, call: Callable[[], T]) -> T:
        self.step = 60.0
        try:
            return call()
        finally:
            self.step = 0.0


class GroupHarness(BrokerHarness):
    def __init__(self, tmp_path: Path, props: Mapping[str, str] | None = None) -> None:
        self.fake = FakeClock()
        defaults = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3",
                    "group.min.session.timeout.ms": "1000"}  # fmt: skip
        super().__init__(tmp_path, {**defaults, **(props or {})}, clock=self.fake)

    def advance(self, ms: int) -> None:
        self.fake.now += ms / 1000
        self.run(self.broker.group_service.tick())

    def together(self, *calls: Coroutine[Any, Any, Any]) -> list[Any]:
        """Run requests concurrently (each as its own task, started in order) and return their answers."""

        async def go() -> list[Any]:
            tasks = []
            for c in calls:
                tasks.append(asyncio.ensure_future(c))
                await asyncio.sleep(0)  # let it reach the coordinator before the next one starts
            return list(await asyncio.gather(*tasks))

        return self.run(go())

    def start(self, api: Api, version: int, body: Any) -> asyncio.Task[Any]:
        """A request left in flight: a task on the harness loop (not yet run; see `settle`)."""
        return self.loop.create_task(self.call_async(api, version, body))

    def settle(self) -> None:
        """Let in-flight requests run until each waits for something."""
        self.run(asyncio.sleep(0.01))

    def create_topic(self, name: str, partitions: int) -> None:
        body = {
            "topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1}],
            "timeout_ms": 100,
        }
        assert self.call(CREATE_TOPICS, 7, body).topics[0].error_code == 0


def join_body(group: str, member_id: str = "", *, topics: tuple[str, ...] = ("t",), protocols: tuple[str, ...] = ("range",),
              session: int = 10_000, rebalance: int = 10_000, instance: str | None = None) -> dict[str, Any]:  # fmt: skip
    meta = encode_subscription(topics)
    return {"group_id": group, "session_timeout_ms": session, "rebalance_timeout_ms": rebalance, "member_id": member_id,
            "group_instance_id": instance, "protocol_type": "consumer",
            "protocols": [{"name": p, "metadata": meta} for p in protocols]}  # fmt: skip


def join_new(h: BrokerHarness, group: str, version: int = 9, **kw: Any) -> str:
    """A v4+ JoinGroup without a member id: the MEMBER_ID_REQUIRED round; returns the id to join with."""
    r = h.call(JOIN_GROUP, version, join_body(group, **kw))
    assert r.error_code == 79, r  # MEMBER_ID_REQUIRED
    return str(r.member_id)


def sync_body(
    group: str, member_id: str, generation: int, assignments: Mapping[str, bytes] | None = None
) -> dict[str, Any]:
    return {"group_id": group, "generation_id": generation, "member_id": member_id,
            "assignments": [{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()]}  # fmt: skip


def heartbeat(h: BrokerHarness, group: str, member_id: str, generation: int, version: int = 4) -> int:
    body = {"group_id": group, "generation_id": generation, "member_id": member_id}
    return int(h.call(HEARTBEAT, version, body).error_code)


def sync(h: BrokerHarness, group: str, member_id: str, generation: int, assignments: Mapping[str, bytes] | None = None,
         version: int = 5) -> Any:  # fmt: skip
    return h.call(SYNC_GROUP, version, sync_body(group, member_id, generation, assignments))
