"""The leader's replication decisions as pure functions (Kafka's Partition.scala): the high
watermark from the ISR, and which followers may join or must leave the ISR. No I/O, no clock: the
caller passes the time.

* High watermark: the smallest log end offset over the ISR (the leader's own included), and it
  never goes back. Strict min-ISR (Kafka 4): while the ISR is smaller than min.insync.replicas the
  high watermark does not move, so nothing is acknowledged or read that fewer replicas hold.
* Expansion (KIP-903): a follower joins when its log end offset has reached the high watermark
  and at least the start of the leader's current epoch, it is registered, unfenced, not in
  controlled shutdown, and its broker epoch is the one it fetched with.
* Shrink: a follower leaves when it has not caught up to the leader's log end within
  replica.lag.time.max.ms.
* Pending changes (Kafka's PendingExpandIsr / PendingShrinkIsr): one AlterPartition in flight per
  partition. Until the controller answers, the high watermark counts the maximal ISR: the
  committed one plus a joining replica, and still the leaving ones (never fewer replicas hold what
  it acknowledges than either ISR says).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower, from its Fetch requests."""

    log_end_offset: int = -1
    last_caught_up_ms: int = 0  # when it last fetched from at least the leader's log end of then
    last_fetch_ms: int = 0
    last_fetch_leader_leo: int = -1  # the leader's log end when that fetch came
    broker_epoch: int = -1
    log_start_offset: int = (
        -1
    )  # its log start offset as its last fetch said (Kafka's UnknownOffset until then)


def high_watermark(
    current: int,
    leader_leo: int,
    leader: int,
    isr: Iterable[int],
    followers: Mapping[int, FollowerState],
    min_isr: int,
    committed_size: int | None = None,
) -> int:
    """The leader's high watermark after a change of log end offsets or of the ISR.

    `isr` is the maximal ISR (with a replica whose joining is pending); `committed_size` the size
    of the ISR the controller has committed, which strict min-ISR compares (default: len(isr)).
    """
    members = list(isr)
    if (len(members) if committed_size is None else committed_size) < min_isr:
        return current
    low = leader_leo
    for r in members:
        if r == leader:
            continue
        f = followers.get(r)
        if f is None or f.log_end_offset < 0:
            return current  # a member not heard from yet holds the high watermark where it is
        low = min(low, f.log_end_offset)
    return max(current, low)


def caught_up(f: FollowerState, leader_leo: int, fetch_offset: int, now_ms: int) -> None:
    """Record a fetch at `fetch_offset` (Kafka's updateFetchStateOrThrow and lastCaughtUpTime rule)."""
    if fetch_offset >= leader_leo:
        f.last_caught_up_ms = now_ms
    elif fetch_offset >= f.last_fetch_leader_leo >= 0:
        f.last_caught_up_ms = max(f.last_caught_up_ms, f.last_fetch_ms)
    f.log_end_offset = fetch_offset
    f.last_fetch_ms = now_ms
    f.last_fetch_leader_leo = leader_leo


def may_join_isr(
    f: FollowerState,
    hw: int,
    leader_epoch_start: int,
    *,
    registered_epoch: int | None,
    fenced: bool,
    in_controlled_shutdown: bool,
) -> bool:
    """KIP-903 eligibility of a follower outside the ISR."""
    return (
        f.log_end_offset >= hw
        and f.log_end_offset >= leader_epoch_start
        and registered_epoch is not None
        and not fenced
        and not in_controlled_shutdown
        and (f.broker_epoch < 0 or f.broker_epoch == registered_epoch)
    )


def out_of_sync(
    isr: Iterable[int], leader: int, followers: Mapping[int, FollowerState], now_ms: int, lag_max_ms: int
) -> list[int]:
    """ISR members that have not caught up within replica.lag.time.max.ms."""
    out = []
    for r in isr:
        if r == leader:
            continue
        f = followers.get(r)
        if f is not None and now_ms - f.last_caught_up_ms > lag_max_ms:
            out.append(r)
    return out
