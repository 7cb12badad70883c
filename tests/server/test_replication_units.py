"""Replication pieces without sockets: a Partition's leader/follower transitions and high
watermark, the leader's DivergingEpoch answer (handlers/fetch.py) and the follower's truncation
on it (replica_fetcher.py), including the case of an epoch that holds no records."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

from kcompat.log import LogConfig, PartitionLog
from kcompat.server.cluster.replication.partition import Partition, Registration
from kcompat.server.cluster.replication.replica_fetcher import FetcherSettings, ReplicaFetcher
from kcompat.server.handlers.fetch import _diverged
from kcompat.wire.types.fetch import EpochEndOffset, FetchPartition, PartitionData
from tests.log.batches import batch

CONFIG = LogConfig(segment_bytes=1 << 20)


def plog_with(tmp_path, name, epochs):
    log = PartitionLog(tmp_path / name, "t", 0, CONFIG, now_ms=0)
    for epoch in epochs:
        log.append(batch(1), leader_epoch=epoch, now_ms=0)
    return log


def fetcher():
    return ReplicaFetcher(2, ("127.0.0.1", 1), FetcherSettings(node_id=1, cluster_id="c", directory_id=uuid.uuid4()),
                          lambda: 7, lambda _name: None, lambda: 0, lambda _p: None)  # fmt: skip


def test_leader_high_watermark_waits_for_the_isr_and_min_isr(tmp_path):
    p = Partition("t", 0, 1, plog_with(tmp_path, "l", [0, 0, 0]), Registration(-1, -1, -1, (), ()), min_isr=2)
    assert p.make_leader(Registration(1, 5, 0, (1, 2, 3), (1, 2, 3)), now_ms=0)
    assert p.log.leader_epoch_cache.latest_epoch == 5  # the new epoch starts at the log end
    assert p.high_watermark == 0
    assert not p.update_follower(2, 3, 11, now_ms=1)  # replica 3 not heard from: held
    assert p.update_follower(3, 2, 12, now_ms=1) and p.high_watermark == 2
    assert p.update_follower(3, 3, 12, now_ms=2) and p.high_watermark == 3
    # The ISR shrinks to the leader alone: below min.insync.replicas=2 nothing more is committed.
    assert not p.make_leader(Registration(1, 5, 1, (1, 2, 3), (1,)), now_ms=3)
    p.log.append(batch(1), leader_epoch=5, now_ms=0)
    assert not p.maybe_increment_hw() and p.high_watermark == 3
    # An AlterPartition answer with an older partition epoch than ours is not applied.
    p.pending_isr = (1, 2)
    assert not p.alter_done(5, (1, 2), 0) and p.pending_isr is None and p.state.isr == (1,)


def test_leader_answers_diverging_epoch_where_the_follower_went_on(tmp_path):
    leader = plog_with(tmp_path, "l", [0, 0, 2, 2])  # epoch 0 ends at 2
    fp = FetchPartition(last_fetched_epoch=1, fetch_offset=3)  # the follower has an epoch 1 at 2
    out = PartitionData()
    assert _diverged(leader, fp, out)
    assert out.diverging_epoch == EpochEndOffset(epoch=0, end_offset=2)
    assert not _diverged(leader, FetchPartition(last_fetched_epoch=2, fetch_offset=4), PartitionData())
    assert not _diverged(leader, FetchPartition(last_fetched_epoch=-1, fetch_offset=0), PartitionData())


def test_follower_truncates_to_the_divergence_and_drops_an_empty_epoch(tmp_path):
    follower = plog_with(tmp_path, "f", [0, 0, 1])  # offsets 0-1 in epoch 0, offset 2 in epoch 1
    p = Partition("t", 0, 1, follower, Registration(2, 3, 0, (1, 2), (1, 2)))
    f = fetcher()
    assert f._truncate(p, 0, 2)  # the leader's epoch 0 ends at 2: offset 2 goes
    assert (follower.log_end_offset, follower.leader_epoch_cache.latest_epoch) == (2, 0)
    # A leadership that appended nothing leaves an epoch starting at the log end: dropped, so the
    # next Fetch names epoch 0 and the same answer does not come back for ever.
    follower.leader_epoch_cache.assign(4, 2)
    assert f._truncate(p, 0, 2)
    assert follower.leader_epoch_cache.latest_epoch == 0
    assert not f._truncate(p, 0, 2)  # nothing left to change: the fetcher backs off


def test_follower_below_the_leaders_log_start_starts_over_there(tmp_path):
    follower = plog_with(tmp_path, "f", [0, 0])
    p = Partition("t", 0, 1, follower, Registration(2, 0, 0, (1, 2), (1, 2)))
    p.update_follower_hw(2)
    f = fetcher()
    f.add(p)
    answer = SimpleNamespace(
        error_code=1, log_start_offset=50, high_watermark=60, diverging_epoch=None, records=None
    )
    assert f._apply((p, 0, 2), answer)  # OFFSET_OUT_OF_RANGE: the leader's log starts at 50
    assert (follower.log_start_offset, follower.log_end_offset, follower.high_watermark) == (50, 50, 50)
    follower.append_as_follower(batch(1, base_offset=50), now_ms=0)
    assert follower.log_end_offset == 51


def test_high_watermark_checkpoint_survives_a_restart(tmp_path):
    """replication-offset-checkpoint (Kafka's format) is written for replicated logs only, and a
    reopened log starts its high watermark there: a leader whose ISR is below min.insync.replicas
    (strict min-ISR holds the high watermark) still serves what was committed before the restart,
    and a follower's is bounded by its log end."""
    from kcompat.log import LogManager

    logs = LogManager([tmp_path], CONFIG, cluster_id="c", node_id=1)
    for topic in ("rep", "single"):
        plog = logs.get_or_create(topic, 0)
        for _ in range(5):
            plog.append(batch(1), leader_epoch=0, now_ms=0)
    logs.get("rep", 0).set_high_watermark(3)
    logs.checkpoint_high_watermarks()
    assert (tmp_path / "replication-offset-checkpoint").read_text() == "0\n1\nrep 0 3\n"
    logs.get("rep", 0).set_high_watermark(4)
    logs.close()  # a clean shutdown writes the latest
    assert (tmp_path / "replication-offset-checkpoint").read_text() == "0\n1\nrep 0 4\n"

    logs = LogManager([tmp_path], CONFIG, cluster_id="c", node_id=1)
    assert (tmp_path / "replication-offset-checkpoint").read_text() == "0\n1\nrep 0 4\n"  # kept until hosted
    leader = Partition("t", 0, 1, logs.get("rep", 0), Registration(-1, -1, -1, (), ()), min_isr=2)
    leader.make_leader(Registration(1, 1, 0, (1, 2), (1,)), now_ms=0)
    assert leader.high_watermark == 4 and not leader.maybe_increment_hw()
    assert logs.get("single", 0).high_watermark == 5  # never replicated: its log end
    logs.close()

    logs = LogManager([tmp_path], CONFIG, cluster_id="c", node_id=1)
    follower = logs.get("rep", 0)
    follower.truncate_to(2)  # e.g. a divergence found before the image made it a replica
    p = Partition("t", 0, 1, follower, Registration(-1, -1, -1, (), ()))
    p.make_follower(Registration(2, 2, 1, (1, 2), (1, 2)))
    assert p.high_watermark == 2
    logs.close()


class KafkaLeader:
    """What a Kafka 4.3 leader answers a follower below its log start: Fetch OFFSET_OUT_OF_RANGE
    with log start -1 (its ReplicaManager does not fill it in for that error), and ListOffsets as
    a replica asks (log end for LATEST, log start for EARLIEST)."""

    def __init__(self, topic_id: uuid.UUID, start: int, end: int) -> None:
        self.topic_id, self.start, self.end = topic_id, start, end
        self.calls: list[int] = []

    async def call(self, api_key: int, version: int, body, timeout_s=None):
        self.calls.append(api_key)
        if api_key == 1:  # Fetch
            part = SimpleNamespace(partition_index=0, error_code=1, log_start_offset=-1, high_watermark=-1,
                                   diverging_epoch=None, records=None)  # fmt: skip
            return SimpleNamespace(
                error_code=0,
                session_id=0,
                responses=[SimpleNamespace(topic_id=self.topic_id, partitions=[part])],
            )
        (t,) = body.topics
        (asked,) = t.partitions
        offset = self.end if asked.timestamp == -1 else self.start
        answer = SimpleNamespace(partition_index=0, error_code=0, offset=offset)
        return SimpleNamespace(topics=[SimpleNamespace(name=t.name, partitions=[answer])])


def test_follower_below_a_kafka_leaders_log_start_asks_it_and_starts_over(tmp_path):
    """The default-format migration's Streams repartition topic: purged (DeleteRecords) on the Java
    leader before the kcompat follower's first fetch, so the follower's fetch at 0 is out of range
    and the answer does not say where the leader's log starts. The follower asks with ListOffsets
    (Kafka's fetchOffsetAndTruncate) and starts over there, instead of backing off for ever."""
    follower = plog_with(tmp_path, "f", [0, 0])
    p = Partition("t", 0, 1, follower, Registration(2, 0, 0, (1, 2), (1, 2)))
    topic_id = uuid.uuid4()
    f = ReplicaFetcher(2, ("127.0.0.1", 1), FetcherSettings(node_id=1, cluster_id="c", directory_id=uuid.uuid4()),
                       lambda: 7, lambda _name: topic_id, lambda: 0, lambda _p: None)  # fmt: skip
    f.add(p)
    leader = KafkaLeader(topic_id, start=50, end=60)
    f._channel = leader  # type: ignore[assignment]
    assert asyncio.run(f._fetch_once())
    assert leader.calls == [1, 2, 2]  # Fetch, then ListOffsets LATEST and EARLIEST
    assert (follower.log_start_offset, follower.log_end_offset) == (50, 50)
    # A leader whose log ends below ours (an unclean election): truncated to its end.
    for offset in range(50, 55):
        follower.append_as_follower(batch(1, base_offset=offset), now_ms=0)
    leader.start, leader.end = 0, 52
    assert asyncio.run(f._fetch_once())
    assert follower.log_end_offset == 52
