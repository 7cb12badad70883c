"""Eligible leader replicas (KIP-966) on a kcompat broker: the image keeps ELR and last-known ELR
from PartitionRecord and PartitionChangeRecord, DescribeTopicPartitions reports them, no ELR
member counts as ISR (high watermark, acks=all), and a leader the controller elects from the ELR
leads as Kafka's broker does: itself the ISR, the high watermark held until min ISR again."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from kcompat.config import BrokerConfig
from kcompat.metadata import records as r
from kcompat.metadata.loader import MetadataLoader
from kcompat.server.cluster.kraft_metadata import KRaftMetadata
from kcompat.server.cluster.replication.partition import Partition, Registration
from kcompat.server.handlers.metadata import _paged_topic
from tests.log.batches import batch as records
from tests.metadata.test_metadata_loader import T1, batch, register, topic
from tests.server.test_replication_units import plog_with


def part(
    replicas: list[int], isr: list[int], leader: int, elr: list[int], lkelr: list[int]
) -> tuple[int, int, dict]:
    body = {"partition_id": 0, "topic_id": T1, "replicas": replicas, "isr": isr, "removing_replicas": [],
            "adding_replicas": [], "leader": leader, "leader_epoch": 4, "partition_epoch": 7,
            "directories": [], "eligible_leader_replicas": elr, "last_known_elr": lkelr}  # fmt: skip
    return (r.PARTITION, 2, body)


def change(**fields: Any) -> tuple[int, int, dict]:
    return (r.PARTITION_CHANGE, 2, {"partition_id": 0, "topic_id": T1, **fields})


def unfence(b: int, epoch: int) -> tuple[int, int, dict]:
    return (r.UNFENCE_BROKER, 0, {"id": b, "epoch": epoch})


def test_image_keeps_elr_and_describe_topic_partitions_reports_it() -> None:
    loader = MetadataLoader()
    loader.append(batch(0, register(1, 10), register(2, 11), register(3, 12), unfence(1, 10), unfence(2, 11),
                        unfence(3, 12), topic("t", T1), part([1, 2, 3], [1], 1, [2], [3])))  # fmt: skip
    md = KRaftMetadata(BrokerConfig({"node.id": "1", "process.roles": "broker"}))
    md.set_image(loader.advance(8))  # type: ignore[arg-type]
    reg = md.image.partition("t", 0)
    assert reg is not None and (reg.isr, reg.elr, reg.last_known_elr) == ((1,), (2,), (3,))
    assert Registration.of(reg).isr == (1,)  # the ELR member is not ISR for replication

    ctx: Any = SimpleNamespace(metadata=md, listener="PLAINTEXT")
    t = md.topic("t")
    assert t is not None
    [p] = _paged_topic(ctx, t, range(1), 0).partitions
    assert (p.isr_nodes, p.eligible_leader_replicas, p.last_known_elr) == ([1], [2], [3])

    # A change without the ELR fields leaves them; with them, replaces them.
    loader.append(batch(8, change(isr=[1, 3])))
    md.set_image(loader.advance(9))  # type: ignore[arg-type]
    reg = md.image.partition("t", 0)
    assert reg is not None and (reg.isr, reg.elr, reg.last_known_elr) == ((1, 3), (2,), (3,))
    loader.append(batch(9, change(eligible_leader_replicas=[], last_known_elr=[])))
    md.set_image(loader.advance(10))  # type: ignore[arg-type]
    [p] = _paged_topic(ctx, t, range(1), 0).partitions
    assert (p.eligible_leader_replicas, p.last_known_elr) == ([], [])


def test_elr_member_never_moves_the_high_watermark(tmp_path) -> None:
    """min.insync.replicas=2, ISR [1], ELR [2]: follower 2 fetching everything commits nothing."""
    p = Partition("t", 0, 1, plog_with(tmp_path, "l", [4, 4, 4]), Registration(-1, -1, -1, (), ()), min_isr=2)
    loader = MetadataLoader()
    loader.append(batch(0, topic("t", T1), part([1, 2], [1], 1, [2], [])))
    image = loader.advance(2)
    assert image is not None
    reg = image.partition("t", 0)
    assert reg is not None
    p.make_leader(Registration.of(reg), now_ms=0)
    assert not p.update_follower(2, 3, 11, now_ms=1)
    assert p.high_watermark == 0
    # acks=all's check (handlers/produce.py) reads the same ISR: 1 < min.insync.replicas.
    assert len(p.state.isr) < p.min_isr


def test_leader_elected_from_the_elr(tmp_path) -> None:
    """The last ISR member is gone (leader -1, ISR [], ELR [2]); the controller elects 2 from the
    ELR: ISR [2]. Broker 2 leads at the new epoch from its own log end, keeps the high watermark it
    had as a follower, and commits again only once follower 1 is back in the ISR (min ISR 2)."""
    follower = plog_with(tmp_path, "f", [4, 4, 4])
    follower.set_high_watermark(2)
    p = Partition("t", 0, 2, follower, Registration(1, 4, 7, (1, 2), (1, 2)), min_isr=2)
    loader = MetadataLoader()
    loader.append(batch(0, topic("t", T1), part([1, 2], [1, 2], 1, [], []),
                        change(isr=[1], eligible_leader_replicas=[2]),
                        change(leader=-1, isr=[], eligible_leader_replicas=[1, 2]),
                        change(leader=2, isr=[2], eligible_leader_replicas=[1])))  # fmt: skip
    image = loader.advance(5)
    assert image is not None
    reg = image.partition("t", 0)
    assert reg is not None and (reg.leader, reg.isr, reg.elr, reg.leader_epoch) == (2, (2,), (1,), 6)
    assert p.make_leader(Registration.of(reg), now_ms=10)
    assert p.log.leader_epoch_cache.latest_epoch == 6 and p.leader_epoch_start == 3
    assert p.high_watermark == 2  # not reset, not advanced: ISR [2] is under min ISR
    p.log.append(records(1), leader_epoch=6, now_ms=0)
    assert not p.update_follower(1, 4, 10, now_ms=11) and p.high_watermark == 2  # 1 is ELR, not ISR
    assert reg.partition_epoch == 10 and p.alter_done(6, (2, 1), 11)  # the ISR expands through AlterPartition
    assert p.high_watermark == 4
