"""Which replica a consumer should read from (KIP-392: Kafka's ReplicaSelector), as pure functions.

`replica.selector.class` names the rule; unset, the leader serves every consumer and Fetch does
none of this. The leader asks on each Fetch from a consumer that sends its rack (v11+):

* Candidates: the leader itself, and each follower that is in the ISR and whose log holds the
  fetch offset (its log start offset at most, its log end offset at least the fetch offset).
  Out-of-sync followers are left out: a lagging one could keep the consumer behind for good.
* Rack-aware (Kafka's RackAwareReplicaSelector): no client rack, or no candidate in it: the leader.
  The leader in that rack: the leader. Otherwise the most caught-up candidate of the rack: the
  largest log end offset, then the one that caught up most recently, then the largest node id.
* The leader's answer names the chosen follower as preferred_read_replica (never itself), with no
  records for that partition; the consumer fetches from the follower from then on.

The caller passes the time (no clock here) and each broker's rack on the client's listener (a
broker without an endpoint there has no rack and is never chosen).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from kcompat.server.cluster.replication.isr import FollowerState
from kcompat.server.cluster.replication.partition import Partition
from kcompat.server.isr_port import ReadReplicaSelector

NO_PREFERRED_REPLICA = -1
RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """One candidate replica as the selector sees it (Kafka's ReplicaView)."""

    node_id: int
    rack: str | None
    log_end_offset: int
    since_caught_up_ms: int  # 0 for the leader


Selector = Callable[[str, ReplicaView, list[ReplicaView]], ReplicaView]


def _caught_up_order(r: ReplicaView) -> tuple[int, int, int]:
    return (r.log_end_offset, -r.since_caught_up_ms, r.node_id)


def rack_aware(client_rack: str, leader: ReplicaView, replicas: list[ReplicaView]) -> ReplicaView:
    """The leader unless a candidate shares the client's rack and the leader does not."""
    if not client_rack:
        return leader
    same_rack = [r for r in replicas if r.rack == client_rack]
    if not same_rack or leader in same_rack:
        return leader
    return max(same_rack, key=_caught_up_order)


SELECTORS: Mapping[str, Selector] = {RACK_AWARE: rack_aware, "rack-aware": rack_aware}


def selector_named(name: str | None) -> ReadReplicaSelector | None:
    """The configured selector (the config's validator admits only the names here), None: leader only."""
    if not name:
        return None
    select = SELECTORS[name]

    def choose(
        p: Partition, client_rack: str, fetch_offset: int, racks: Mapping[int, str | None], now_ms: int
    ) -> int:
        return preferred_read_replica(
            select,
            client_rack,
            fetch_offset,
            leader=p.node_id,
            leader_log_end=p.log.log_end_offset,
            isr=p.state.isr,
            followers=p.followers,
            racks=racks,
            now_ms=now_ms,
        )

    return choose


def preferred_read_replica(
    select: Selector,
    client_rack: str,
    fetch_offset: int,
    *,
    leader: int,
    leader_log_end: int,
    isr: Iterable[int],
    followers: Mapping[int, FollowerState],
    racks: Mapping[int, str | None],
    now_ms: int,
) -> int:
    """The follower a consumer at `fetch_offset` should read from, or NO_PREFERRED_REPLICA (the leader)."""
    leader_view = ReplicaView(leader, racks.get(leader), leader_log_end, 0)
    candidates = [leader_view]
    for r in isr:
        f = followers.get(r)
        if r == leader or f is None:
            continue
        if f.log_end_offset >= fetch_offset and f.log_start_offset <= fetch_offset:
            candidates.append(ReplicaView(r, racks.get(r), f.log_end_offset, now_ms - f.last_caught_up_ms))
    chosen = select(client_rack, leader_view, candidates)
    if chosen is leader_view or chosen.node_id not in racks:
        return NO_PREFERRED_REPLICA
    return chosen.node_id
