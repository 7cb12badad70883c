"""The share-group rows of the side-by-side run (the "share" suite, KIP-932), against each broker:

- confluent: confluent-kafka's ShareConsumer, 1 or 2 members (one thread each) of a fresh share
             group reading one partition, implicit acknowledgement (each poll accepts the previous
             one's records) or explicit (acknowledge(ACCEPT) per record, sent with the next poll);
- java:      Kafka's ShareConsumerPerformance (--threads 1 or 2), implicit acknowledgement: the
             tool has no explicit mode, so the Java rows are implicit only.

Each record size has one topic of SHARE_RECORDS records, produced before the clock starts; every
row reads all of it through its own share group, set to start at the log start
(share.auto.offset.reset=earliest, a group config set with IncrementalAlterConfigs before the
first member joins). The confluent rows are timed from the first record received to the last
(the group join and the first batch excluded, as ConsumerPerformance's fetch figures exclude the join); broker CPU per GB
covers the whole row, join and close included. The suite runs in the first round only. Counts are small so that the suite adds well under
a minute per broker: the figures are for the share path's cost per record, not a sustained run.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from benchmarks import confluent_clients as cc
from benchmarks import java_tools
from benchmarks.plan import Plan, size_label

if TYPE_CHECKING:
    from benchmarks.suite import Suite

CLIENTS = ("confluent", "java")
MEMBERS = (1, 2)
MODES = ("implicit", "explicit")
# Records per row, by record size: the full run and the --quick run (Plan.records[size] < this).
FULL_RECORDS = {100: 150_000, 1024: 40_000}


def key(client: str, members: int, size: int, mode: str) -> str:
    return f"share/{client}/{members}m/{size}/{mode}"


def _clients(plan: Plan) -> tuple[str, ...]:
    """--no-java drops the Java rows here too."""
    return tuple(c for c in CLIENTS if c != "java" or "java" in plan.clients)


def _modes(client: str) -> tuple[str, ...]:
    return MODES if client == "confluent" else ("implicit",)


def rows(plan: Plan) -> list[tuple[str, str]]:
    """(label, key) of every row, in report order."""
    return [
        (f"{c} {m} member{'s' if m > 1 else ''} {size_label(s)} {mode}", key(c, m, s, mode))
        for c in _clients(plan) for m in MEMBERS for s in plan.sizes for mode in _modes(c)
    ]  # fmt: skip


def count(plan: Plan, size: int) -> int:
    return min(FULL_RECORDS[size], plan.records[size])


def earliest(bootstrap: str, group: str, timeout: float = 30.0) -> None:
    """The share group starts at the log start (Kafka's default, `latest`, would see nothing)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout)


def confluent_share(
    bootstrap: str, topic: str, want: int, members: int, mode: str, timeout: float
) -> cc.Throughput:
    group = f"bench-share-{uuid.uuid4().hex[:8]}"
    earliest(bootstrap, group)
    explicit = mode == "explicit"
    consumers = [
        ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": mode})
        for _ in range(members)
    ]
    lock = threading.Lock()
    state = {"got": 0, "bytes": 0, "first": 0.0, "last": 0.0, "first_got": 0, "first_bytes": 0}
    errors: list[str] = []
    deadline = time.perf_counter() + timeout

    def member(c: ShareConsumer) -> None:
        accept = AcknowledgeType.ACCEPT
        try:
            c.subscribe([topic])
            while state["got"] < want and not errors and time.perf_counter() < deadline:
                msgs = c.poll(0.5)
                if not msgs:
                    continue
                nbytes = 0
                for m in msgs:
                    if m.error() is not None:
                        raise KafkaException(m.error())
                    nbytes += len(m)
                    if explicit:
                        c.acknowledge(m, accept)
                now = time.perf_counter()
                with lock:
                    if not state["got"]:
                        state["first"], state["first_got"], state["first_bytes"] = now, len(msgs), nbytes
                    state["got"] += len(msgs)
                    state["bytes"] += nbytes
                    state["last"] = now
        except Exception as e:
            errors.append(f"{type(e).__name__}: {e}")

    threads = [
        threading.Thread(target=member, args=(c,), name=f"share-member-{i}") for i, c in enumerate(consumers)
    ]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        for c in consumers:
            c.close()
    if errors:
        raise RuntimeError(errors[0])
    got = int(state["got"])
    if got < want:
        raise TimeoutError(f"share group read {got} of {want} records of {topic} in {timeout} s")
    # The first batch's arrival starts the clock: the rate is over the records after it.
    seconds = max(state["last"] - state["first"], 1e-6)
    return cc.Throughput(got - int(state["first_got"]), int(state["bytes"] - state["first_bytes"]), seconds)


def java_share(
    bootstrap: str, topic: str, want: int, members: int, timeout: float
) -> java_tools.ConsumerPerf:
    group = f"bench-share-{uuid.uuid4().hex[:8]}"
    earliest(bootstrap, group)
    return java_tools.share_consumer_perf(bootstrap, topic, group, want, members, timeout)


def run(suite: Suite) -> None:
    plan, b = suite.plan, suite.broker
    timeout = plan.timeouts["run"]
    for size in plan.sizes:
        topic, n = f"share-{size}", count(plan, size)
        cc.create_topic(b.bootstrap, topic)
        cc.produce(b.bootstrap, topic, n, size, "1", "none", timeout)
    # Warm-up: the first share group's costs (the share-state topic, the coordinator) in no row.
    confluent_share(b.bootstrap, f"share-{plan.sizes[0]}", 10, 1, "implicit", timeout)
    for client in _clients(plan):
        for members in MEMBERS:
            for size in plan.sizes:
                for mode in _modes(client):
                    k, topic, n = key(client, members, size, mode), f"share-{size}", count(plan, size)
                    work: Callable[[], Any]
                    if client == "confluent":
                        work = partial(confluent_share, b.bootstrap, topic, n, members, mode, timeout)
                    else:
                        work = partial(java_share, b.bootstrap, topic, n, members, timeout)
                    result = suite._measure(k, partial(_nbytes, n * size), work)
                    if result is not None:
                        suite.values[f"{k}/records_per_s"] = result.records_per_s
                        suite.values[f"{k}/mb_per_s"] = result.mb_per_s


def _nbytes(read: int, _result: Any) -> int:
    """Record value bytes moved: what the row's CPU s/GB divides by (as the plain rows)."""
    return read
