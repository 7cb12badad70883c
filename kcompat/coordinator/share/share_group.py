"""A share group (KIP-932): members, epochs, heartbeats and the `simple` share assignor, pure.

    group epoch       bumped whenever membership, a subscription or the subscribed topics change
    assignment epoch  the group epoch the target assignment was computed for
    member epoch      the assignment epoch the member was last given

Unlike a consumer group, a share group never revokes: a partition may be read by several members
at once (the share-partition hands each record to one of them), so a member takes its new target
assignment, and the group's epoch, on its next heartbeat.

Only share-partitions whose state is initialized are assigned (Kafka's GroupMetadataManager): the
coordinator initializes the others (InitializeShareGroupState) first, then `initializing_done` bumps
the group epoch so that the next assignment includes them. A leader of any kind can then load the
state of every partition a member fetches from. This init state, with everything else above, is
written to __consumer_offsets as the ShareGroup* records (share_group_records.py).

The `simple` assignor (Kafka's SimpleAssignor, homogeneous case): with at least as many partitions
as members each partition goes to one member, round robin; with more members than partitions every
member gets one partition, so partitions are shared by several members.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from kcompat.wire.error_codes import ErrorCode

Assignment = dict[uuid.UUID, list[int]]  # topic id -> partitions
LEAVE_EPOCH = -1


class ShareGroupState(Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True)
class ShareMember:
    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    rack_id: str | None
    subscribed: tuple[str, ...]
    deadline_ms: int  # session expiry: share.session.timeout.ms after the last heartbeat
    assignment: Assignment = field(default_factory=dict)  # the target
    previous_member_epoch: int = 0
    current: Assignment = field(default_factory=dict)  # what the member was given with its epoch


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error_code: ErrorCode
    member_id: str | None = None
    member_epoch: int = 0
    assignment: Assignment | None = None
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class ShareGroupTiming:
    session_timeout_ms: int = 45000  # group.share.session.timeout.ms / share.session.timeout.ms
    heartbeat_interval_ms: int = 5000  # group.share.heartbeat.interval.ms
    max_size: int = 200  # group.share.max.size


def subscription_hash(partitions: tuple[tuple[uuid.UUID, int], ...]) -> int:
    """A signed 64-bit digest of the subscribed topics' partitions (ShareGroupMetadata's MetadataHash):
    a change of it after a reload, as before, bumps the group epoch. Kafka hashes differently; a
    coordinator meeting another's hash only bumps the epoch once."""
    counts: dict[uuid.UUID, int] = {}
    for tid, _ in partitions:
        counts[tid] = counts.get(tid, 0) + 1
    if not counts:
        return 0
    text = ";".join(f"{t}:{n}" for t, n in sorted(counts.items()))
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big", signed=True)


def simple_assign(members: list[str], partitions: list[tuple[uuid.UUID, int]]) -> dict[str, Assignment]:
    """Kafka's `simple` share assignor for members subscribed to the same topics."""
    out: dict[str, Assignment] = {m: {} for m in members}
    if not members or not partitions:
        return out
    ordered = sorted(members)
    if len(partitions) >= len(ordered):
        for i, (tid, p) in enumerate(partitions):
            out[ordered[i % len(ordered)]].setdefault(tid, []).append(p)
    else:
        for i, m in enumerate(ordered):
            tid, p = partitions[i % len(partitions)]
            out[m].setdefault(tid, []).append(p)
    return out


class ShareGroup:
    """One share group on its coordinator."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ShareMember] = {}
        self.metadata_hash = 0
        # share-partitions by the state of their share state (ShareGroupStatePartitionMetadata)
        self.initializing: dict[uuid.UUID, set[int]] = {}
        self.initialized: dict[uuid.UUID, set[int]] = {}
        self.deleting: set[uuid.UUID] = set()
        self.topic_names: dict[uuid.UUID, str] = {}  # of the topics above, for the records

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed}

    def heartbeat(
        self,
        now_ms: int,
        member_id: str,
        member_epoch: int,
        *,
        rack_id: str | None,
        subscribed: list[str] | None,
        client_id: str,
        client_host: str,
        timing: ShareGroupTiming,
        partitions_of: Callable[[str], list[tuple[uuid.UUID, int]]],
    ) -> HeartbeatResult:
        """One ShareGroupHeartbeat: join (epoch 0), heartbeat (the member's epoch) or leave (-1)."""
        member = self.members.get(member_id)
        if member_epoch == LEAVE_EPOCH:
            if member is None:
                return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID)
            self.remove(member_id, partitions_of)
            return HeartbeatResult(ErrorCode.NONE, member_id, LEAVE_EPOCH)
        if member is None:
            if member_epoch != 0:
                return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID)
            if len(self.members) >= timing.max_size:
                return HeartbeatResult(ErrorCode.GROUP_MAX_SIZE_REACHED)
            if not subscribed:
                return HeartbeatResult(
                    ErrorCode.INVALID_REQUEST,
                    error_message="SubscribedTopicNames must be set in the first request.",
                )
            member = ShareMember(member_id, 0, client_id, client_host, rack_id, tuple(subscribed), 0)
            self.members[member_id] = member
            self.group_epoch += 1
        elif member_epoch not in (member.member_epoch, 0):
            return HeartbeatResult(ErrorCode.FENCED_MEMBER_EPOCH)
        elif subscribed is not None and tuple(subscribed) != member.subscribed:
            member.subscribed = tuple(subscribed)
            self.group_epoch += 1
        if rack_id is not None:
            member.rack_id = rack_id
        member.deadline_ms = now_ms + timing.session_timeout_ms
        self._maybe_assign(partitions_of)
        return self._answer(member, full=member_epoch == 0)

    def _answer(self, member: ShareMember, *, full: bool) -> HeartbeatResult:
        if member.member_epoch != self.assignment_epoch:
            full = True
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = self.assignment_epoch
            member.current = member.assignment
        return HeartbeatResult(
            ErrorCode.NONE, member.member_id, member.member_epoch, member.assignment if full else None
        )

    # --- share-partition state initialization ------------------------------------------------------

    def uninitialized(
        self, partitions_of: Callable[[str], list[tuple[uuid.UUID, int]]]
    ) -> dict[uuid.UUID, set[int]]:
        """Subscribed share-partitions whose state is neither initialized nor being initialized."""
        out: dict[uuid.UUID, set[int]] = {}
        for t in sorted(self.subscribed_topics()):
            for tid, p in partitions_of(t):
                if p not in self.initialized.get(tid, ()) and p not in self.initializing.get(tid, ()):
                    out.setdefault(tid, set()).add(p)
        return out

    def initializing_started(
        self, parts: Mapping[uuid.UUID, set[int]], names: Mapping[uuid.UUID, str]
    ) -> None:
        for tid, ps in parts.items():
            self.initializing.setdefault(tid, set()).update(ps)
            self.topic_names[tid] = names[tid]

    def initializing_done(
        self,
        parts: Mapping[uuid.UUID, set[int]],
        ok: bool,
        partitions_of: Callable[[str], list[tuple[uuid.UUID, int]]],
    ) -> None:
        """The InitializeShareGroupState calls for `parts` ended: initialized (the group epoch goes
        up, so the partitions are assigned at once) or failed (tried again on a later heartbeat)."""
        for tid, ps in parts.items():
            left = self.initializing.get(tid, set()) - ps
            if left:
                self.initializing[tid] = left
            else:
                self.initializing.pop(tid, None)
            if ok:
                self.initialized.setdefault(tid, set()).update(ps)
        if ok and parts:
            self.group_epoch += 1
            self._maybe_assign(partitions_of)

    def answer(self, member_id: str) -> HeartbeatResult | None:
        """The member's heartbeat answer now (after an initialization moved the assignment on)."""
        m = self.members.get(member_id)
        return None if m is None else self._answer(m, full=False)

    def _maybe_assign(self, partitions_of: Callable[[str], list[tuple[uuid.UUID, int]]]) -> None:
        topics = sorted(self.subscribed_topics())
        digest = subscription_hash(tuple(tp for t in topics for tp in partitions_of(t)))
        if digest != self.metadata_hash:
            self.metadata_hash = digest
            if self.assignment_epoch == self.group_epoch:
                self.group_epoch += 1  # the subscribed topics' metadata changed
        if self.assignment_epoch == self.group_epoch:
            return
        # Members subscribe by topic: each gets the simple assignment of the topics it subscribes to.
        by_topics: dict[tuple[str, ...], list[str]] = {}
        for m in self.members.values():
            by_topics.setdefault(tuple(sorted(m.subscribed)), []).append(m.member_id)
        for subs, ids in by_topics.items():
            wanted = [tp for t in subs for tp in partitions_of(t) if tp[1] in self.initialized.get(tp[0], ())]
            for mid, a in simple_assign(ids, wanted).items():
                self.members[mid].assignment = a
        self.assignment_epoch = self.group_epoch

    def remove(self, member_id: str, partitions_of: Callable[[str], list[tuple[uuid.UUID, int]]]) -> None:
        if self.members.pop(member_id, None) is not None:
            self.group_epoch += 1
            self._maybe_assign(partitions_of)

    def expired(self, now_ms: int) -> list[str]:
        return [m.member_id for m in self.members.values() if m.deadline_ms <= now_ms]

    def next_deadline_ms(self) -> int | None:
        return min((m.deadline_ms for m in self.members.values()), default=None)


class ShareGroups:
    """Every share group this coordinator holds, by group id."""

    def __init__(self) -> None:
        self.groups: dict[str, ShareGroup] = {}

    def get_or_create(self, group_id: str) -> ShareGroup:
        g = self.groups.get(group_id)
        if g is None:
            g = self.groups[group_id] = ShareGroup(group_id)
        return g

    def loaded(self, now_ms: int, session_timeout_ms: Callable[[str], int], group_ids: Iterable[str]) -> None:
        """After a load, as Kafka after a reload: the loaded members' sessions start afresh, and the
        share-partitions left initializing (by a coordinator that stopped mid-way) are initialized
        again by the next heartbeat (initializing one twice is harmless: it is read first)."""
        for gid in group_ids:
            g = self.groups.get(gid)
            if g is None:
                continue
            for m in g.members.values():
                m.deadline_ms = now_ms + session_timeout_ms(gid)
            g.initializing = {}

    def next_deadline_ms(self) -> int | None:
        return min((d for g in self.groups.values() if (d := g.next_deadline_ms()) is not None), default=None)

    def member_ids(self) -> Mapping[str, set[str]]:
        return {gid: set(g.members) for gid, g in self.groups.items()}
