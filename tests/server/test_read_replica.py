"""KIP-392 without sockets: the rack-aware replica selector's rules, the leader's candidates
(replica_selector.py), and Fetch's reading from a follower (handlers/fetch.py): the follower's
high watermark and last stable offset bound what a consumer reads, the out-of-range and epoch
answers, and the leader naming a preferred read replica with no records."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from kcompat.log import LogConfig, PartitionLog
from kcompat.server.cluster.replication.isr import FollowerState
from kcompat.server.cluster.replication.partition import Partition, Registration
from kcompat.server.cluster.replication.replica_fetcher import FetcherSettings, ReplicaFetcher
from kcompat.server.cluster.replication.replica_selector import (
    RACK_AWARE,
    ReplicaView,
    preferred_read_replica,
    rack_aware,
    selector_named,
)
from kcompat.server.handlers.fetch import _read_all
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.types.fetch import FetchPartition
from tests.log.batches import batch

CONFIG = LogConfig(segment_bytes=1 << 20)
TXN = 0x10  # isTransactional


def view(node: int, rack: str | None, leo: int = 10, since: int = 0) -> ReplicaView:
    return ReplicaView(node, rack, leo, since)


def test_rack_aware_picks_the_leader_unless_only_followers_share_the_rack():
    leader = view(1, "a")
    b2, b3, c4 = view(2, "b", 9), view(3, "b", 10, 50), view(4, "c")
    replicas = [leader, b2, b3, c4]
    assert rack_aware("", leader, replicas) is leader  # no client rack
    assert rack_aware("z", leader, replicas) is leader  # nobody in it
    assert rack_aware("a", leader, replicas) is leader  # the leader is in it
    assert rack_aware("b", leader, replicas) is b3  # the largest log end offset
    b5 = view(5, "b", 10, 20)  # as far, caught up more recently
    assert rack_aware("b", leader, [*replicas, b5]) is b5
    b6 = view(6, "b", 10, 20)  # a tie on both: the larger id
    assert rack_aware("b", leader, [*replicas, b5, b6]) is b6


def test_selector_names():
    assert selector_named(None) is None and selector_named("") is None
    assert selector_named(RACK_AWARE) is not None and selector_named("rack-aware") is not None


def choose(fetch_offset: int, **followers: FollowerState) -> int:
    states = {int(k[1:]): f for k, f in followers.items()}
    return preferred_read_replica(
        rack_aware,
        "b",
        fetch_offset,
        leader=1,
        leader_log_end=10,
        isr=(1, 2, 3),
        followers=states,
        racks={1: "a", 2: "b", 3: "c", 4: "b"},
        now_ms=1_000,
    )


def test_candidates_are_in_sync_followers_holding_the_offset():
    ok = FollowerState(log_end_offset=10, last_caught_up_ms=900, log_start_offset=0)
    assert choose(5, b2=ok, b3=ok) == 2
    assert choose(5, b3=ok, b4=ok) == -1  # 4 shares the rack but is not in the ISR
    assert choose(5, b2=FollowerState(log_end_offset=4, log_start_offset=0)) == -1  # lags the offset
    assert choose(5, b2=FollowerState(log_end_offset=10, log_start_offset=6)) == -1  # deleted it
    assert choose(5, b2=FollowerState(log_end_offset=10)) == 2  # log start not heard of yet: -1
    no_endpoint = preferred_read_replica(
        rack_aware, "b", 5, leader=1, leader_log_end=10, isr=(1, 2), followers={2: ok},
        racks={1: "a"}, now_ms=0,
    )  # fmt: skip
    assert no_endpoint == -1  # a broker without an endpoint on the client's listener has no rack


# --- Fetch on a follower (replica 2 of t-0, led by 1 at epoch 3) -----------------------------------


def follower_log(tmp_path: Any) -> PartitionLog:
    """Offsets 0-1 plain, 2 an open transaction's, 3-4 plain; high watermark 4, log end 5."""
    log = PartitionLog(tmp_path / "t-0", "t", 0, CONFIG, now_ms=0)
    log.start_replicated()
    for offset in range(5):
        txn = offset == 2
        log.append_as_follower(
            batch(1, base_offset=offset, producer_id=7 if txn else -1, producer_epoch=0 if txn else -1,
                  base_sequence=0 if txn else -1, attributes=TXN if txn else 0),
            now_ms=0,
        )  # fmt: skip
    return log


def context(hosted: dict[tuple[str, int], Partition], node_id: int, select: Any = None) -> Any:
    logs = {tp: p.log for tp, p in hosted.items()}
    replicas = SimpleNamespace(
        partitions=hosted,
        cluster_mode=True,
        read_replica=select,
        partition_log=lambda topic, partition: logs[(topic, partition)],
        log_error=lambda topic, partition: None,  # no log dir failed
        fetch_waiters=SimpleNamespace(notify=lambda tp: None),
        isr_manager=None,
    )
    metadata = SimpleNamespace(
        topic=lambda name: SimpleNamespace(name=name, partitions=1) if name == "t" else None,
        leader_and_epoch=lambda t, partition: (1, 3),
        live_brokers=lambda listener: [
            SimpleNamespace(node_id=n, rack=r) for n, r in ((1, "a"), (2, "b"), (3, "c"))
        ],
    )
    return SimpleNamespace(
        replicas=replicas, metadata=metadata, identity=SimpleNamespace(node_id=node_id), listener="PLAINTEXT",
        now_ms=1_000,
    )  # fmt: skip


def fetch(ctx: Any, offset: int, *, rack: str | None = "", committed: bool = False, epoch: int = 3) -> Any:
    fp = FetchPartition(
        partition=0, fetch_offset=offset, current_leader_epoch=epoch, partition_max_bytes=1 << 20
    )
    results, _, _, _ = asyncio.run(
        _read_all(ctx, [(("t", 0), "t", 0, fp)], 1 << 20, (-1, -1), False, True, committed, frozenset(), rack)
    )
    return results[0]


@pytest.fixture
def on_follower(tmp_path: Any) -> tuple[Any, PartitionLog]:
    log = follower_log(tmp_path)
    p = Partition("t", 0, 2, log, Registration(-1, -1, -1, (), ()))
    p.make_follower(Registration(1, 3, 0, (1, 2, 3), (1, 2, 3)))
    p.update_follower_hw(4)
    assert (log.high_watermark, log.log_end_offset, log.last_stable_offset) == (4, 5, 2)
    return context({("t", 0): p}, node_id=2), log


def offsets_in(data: Any) -> list[int]:
    records = data if isinstance(data, bytes) else data.read_bytes()
    out, pos = [], 0
    while pos < len(records):
        base = int.from_bytes(records[pos : pos + 8], "big")
        size = int.from_bytes(records[pos + 8 : pos + 12], "big")
        out.append(base)
        pos += 12 + size
    return out


def test_follower_serves_consumers_up_to_its_high_watermark(on_follower):
    ctx, _ = on_follower
    out = fetch(ctx, 0)
    assert out.error_code == 0 and out.high_watermark == 4 and offsets_in(out.records) == [0, 1, 2, 3]
    assert out.preferred_read_replica == -1
    # read_committed: below its own last stable offset (the open transaction at 2)
    out = fetch(ctx, 0, committed=True)
    assert out.last_stable_offset == 2 and offsets_in(out.records) == [0, 1]
    # between its high watermark and its log end: nothing yet, no error
    out = fetch(ctx, 4)
    assert out.error_code == 0 and not out.records
    # past its log end: OFFSET_OUT_OF_RANGE (never OFFSET_NOT_AVAILABLE in a Fetch)
    assert fetch(ctx, 6).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert fetch(ctx, 5).error_code == 0  # the log end itself is in range


def test_follower_refuses_old_fetches_stale_epochs_and_non_replicas(on_follower, tmp_path):
    ctx, _ = on_follower
    assert fetch(ctx, 0, rack=None).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER  # v10 or older
    assert fetch(ctx, 0, epoch=2).error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert fetch(ctx, 0, epoch=4).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    elsewhere = context({}, node_id=2)  # no longer a replica here
    assert fetch(elsewhere, 0).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_leader_names_the_follower_in_the_clients_rack_with_no_records(tmp_path):
    log = follower_log(tmp_path)
    p = Partition("t", 0, 1, log, Registration(-1, -1, -1, (), ()))
    p.make_leader(Registration(1, 3, 0, (1, 2, 3), (1, 2, 3)), now_ms=0)
    p.update_follower(2, 5, 1, now_ms=900, log_start_offset=0)
    p.update_follower(3, 5, 1, now_ms=900, log_start_offset=0)
    ctx = context({("t", 0): p}, node_id=1, select=selector_named("rack-aware"))
    out = fetch(ctx, 0, rack="b")
    assert out.preferred_read_replica == 2 and not out.records and out.error_code == 0
    assert (out.high_watermark, out.log_start_offset) == (log.high_watermark, 0)
    out = fetch(ctx, 0, rack="a")  # the leader's own rack: served here
    assert out.preferred_read_replica == -1 and offsets_in(out.records)
    out = fetch(ctx, 0, rack="")  # no rack: served here
    assert out.preferred_read_replica == -1 and offsets_in(out.records)
    no_selector = context({("t", 0): p}, node_id=1)
    assert fetch(no_selector, 0, rack="b").preferred_read_replica == -1


def test_a_followers_high_watermark_moving_wakes_its_consumers(tmp_path):
    """The replica fetcher calls back when the follower's high watermark moves (assembly.py wakes
    consumers long-polling there with it), not for an append that leaves it where it was."""
    log = PartitionLog(tmp_path / "t-0", "t", 0, CONFIG, now_ms=0)
    p = Partition("t", 0, 2, log, Registration(-1, -1, -1, (), ()))
    p.make_follower(Registration(1, 3, 0, (1, 2), (1, 2)))
    moved: list[int] = []
    f = ReplicaFetcher(1, ("127.0.0.1", 1), FetcherSettings(node_id=2, cluster_id="c", directory_id=uuid.uuid4()),
                       lambda: 7, lambda _name: None, lambda: 0, lambda q: moved.append(q.high_watermark))  # fmt: skip
    f.add(p)
    answer = SimpleNamespace(error_code=0, diverging_epoch=None, records=batch(2), high_watermark=0)
    assert f._apply((p, 3, 0), answer) and log.log_end_offset == 2 and moved == []
    answer = SimpleNamespace(error_code=0, diverging_epoch=None, records=None, high_watermark=2)
    assert f._apply((p, 3, 2), answer) and moved == [2]
