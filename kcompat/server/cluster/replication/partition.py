"""Partition: one replica this cluster-mode broker hosts, leader or follower (Kafka's Partition).

State from the controller (the latest PartitionRegistration in the image): leader, leader epoch,
partition epoch, replicas and ISR. State of its own: the log and, as leader, what each follower
last fetched (isr.py decides the high watermark from it).

    image ──ReplicaManager delta──► make_leader / make_follower / (stop, delete)
    Fetch from a follower ──► update_follower ──► high watermark ──► wake parked requests
    ReplicaFetcher ──► append_as_follower, follower high watermark = min(leader's, log end)

Becoming leader records the new epoch at the log end in the leader-epoch cache (so followers'
OffsetForLeaderEpoch and diverging-epoch checks see where it starts), and forgets what followers
had fetched under the previous leadership.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kcompat.log.partition_log import PartitionLog
from kcompat.metadata.image import PartitionRegistration
from kcompat.server.cluster.replication import isr as rules
from kcompat.server.cluster.replication.isr import FollowerState


@dataclass(frozen=True, slots=True)
class Registration:
    """The controller's view of the partition (from the image)."""

    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    @classmethod
    def of(cls, reg: PartitionRegistration) -> Registration:
        """The image's registration as replication uses it: the ISR alone. Eligible leader
        replicas (KIP-966) are kept in the image but never count as ISR here, neither for the high
        watermark nor for acks=all's min.insync.replicas check; a leader the controller elected
        from the ELR comes with itself as the ISR and is a leader like any other (Kafka's
        Partition.makeLeader has no ELR case): the high watermark waits for min ISR again."""
        return cls(reg.leader, reg.leader_epoch, reg.partition_epoch, reg.replicas, reg.isr)


@dataclass(eq=False)
class Partition:
    topic: str
    index: int
    node_id: int
    log: PartitionLog
    state: Registration
    min_isr: int = 1
    followers: dict[int, FollowerState] = field(default_factory=dict)
    leader_epoch_start: int = 0  # the log end offset when this leadership began
    pending_isr: tuple[int, ...] | None = None  # the ISR proposed by an AlterPartition in flight

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The committed ISR with the replicas a pending change adds (isr.py: pending changes)."""
        if self.pending_isr is None:
            return self.state.isr
        return self.state.isr + tuple(r for r in self.pending_isr if r not in self.state.isr)

    def alter_done(self, leader_epoch: int, isr: tuple[int, ...], partition_epoch: int) -> bool:
        """The controller's answer to our AlterPartition: the ISR it committed (True when applied)."""
        self.pending_isr = None
        if (
            not self.is_leader
            or leader_epoch != self.state.leader_epoch
            or partition_epoch < self.state.partition_epoch
        ):
            return False
        self.state = Registration(self.state.leader, leader_epoch, partition_epoch, self.state.replicas, isr)
        self.maybe_increment_hw()
        return True

    @property
    def is_leader(self) -> bool:
        return self.state.leader == self.node_id

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def make_leader(self, reg: Registration, now_ms: int) -> bool:
        """Lead at `reg.leader_epoch` (True when this is a new leadership, not an ISR change)."""
        new_term = not self.is_leader or reg.leader_epoch != self.state.leader_epoch
        if not new_term and reg.partition_epoch < self.state.partition_epoch:
            return False  # an AlterPartition answer already gave us a newer state
        self.state = reg
        self.pending_isr = None
        self.log.start_replicated()
        if new_term:
            self.leader_epoch_start = self.log.log_end_offset
            # Kept in memory until the log's next flush (a file written here for each of thousands
            # of partitions an image makes leader at once would hold the event loop).
            self.log.leader_epoch_cache.assign(reg.leader_epoch, self.log.log_end_offset, write=False)
            # ISR members count as caught up when the leadership starts (Kafka's resetReplicaState).
            self.followers = {
                r: FollowerState(last_caught_up_ms=now_ms if r in reg.isr else 0)
                for r in reg.replicas
                if r != self.node_id
            }
        else:
            for r in reg.replicas:
                if r != self.node_id:
                    self.followers.setdefault(r, FollowerState())
        self.maybe_increment_hw()
        return new_term

    def make_follower(self, reg: Registration) -> bool:
        """Follow `reg.leader` (True when the leader or its epoch changed: the fetcher starts over)."""
        changed = (
            self.is_leader or reg.leader != self.state.leader or reg.leader_epoch != self.state.leader_epoch
        )
        self.state = reg
        self.followers = {}
        self.pending_isr = None
        self.log.start_replicated()
        return changed

    def update_follower(
        self, replica_id: int, fetch_offset: int, broker_epoch: int, now_ms: int, log_start_offset: int = -1
    ) -> bool:
        """A Fetch from a follower at `fetch_offset`: True when the high watermark moved."""
        f = self.followers.get(replica_id)
        if f is None:
            return False
        f.log_start_offset = log_start_offset
        rules.caught_up(f, self.log.log_end_offset, fetch_offset, now_ms)
        if broker_epoch >= 0:
            f.broker_epoch = broker_epoch
        return self.maybe_increment_hw()

    def maybe_increment_hw(self) -> bool:
        if not self.is_leader:
            return False
        before = self.log.high_watermark
        hw = rules.high_watermark(
            before,
            self.log.log_end_offset,
            self.node_id,
            self.maximal_isr,
            self.followers,
            self.min_isr,
            len(self.state.isr),
        )
        if hw > before:
            self.log.set_high_watermark(hw)
            return True
        return False

    def update_follower_hw(self, leader_hw: int) -> bool:
        """As follower: the high watermark the leader sent, bounded by this log's end."""
        before = self.log.high_watermark
        return self.log.set_high_watermark(min(leader_hw, self.log.log_end_offset)) != before
