"""A KIP-848 group's target assignment (Kafka's TargetAssignmentBuilder and subscription metadata):
the subscribed topics as they are now, and the assignment the group's server-side assignor computes
from them. Each writes its record when it changed; members then reconcile towards the target one
step per heartbeat (consumer_group.py).
"""

from __future__ import annotations

import re

import kcompat.coordinator.records as rec
from kcompat.coordinator.assignors import ASSIGNORS, MemberSubscription
from kcompat.coordinator.consumer_group import Assignment, ConsumerGroup
from kcompat.coordinator.group_store import GroupStore
from kcompat.coordinator.result import Effects


def _everything(topic: str) -> bool:
    return True


def refresh_subscription_metadata(out: Effects, group: ConsumerGroup, store: GroupStore) -> bool:
    """Resolve regexes and look the subscribed topics up; True (and a record) when that changed."""
    metadata = store.topic_metadata()
    may = group.describable or _everything
    group.resolved_regex = {
        m.subscribed_topic_regex: frozenset(
            t for t in metadata if re.fullmatch(m.subscribed_topic_regex, t) and may(t)
        )
        for m in group.members.values()
        if m.subscribed_topic_regex is not None
    }
    fresh = {t: metadata[t] for t in sorted(group.subscribed_topic_names()) if t in metadata}
    if fresh == group.subscription_metadata:
        return False
    group.subscription_metadata = fresh
    out.emit(
        rec.ConsumerGroupPartitionMetadataKey(group.group_id),
        rec.ConsumerGroupPartitionMetadataValue(
            tuple(rec.TopicMetadata(tid, name, n) for name, (tid, n) in fresh.items())
        ),
    )
    return True


def update_target_assignment(out: Effects, group: ConsumerGroup, store: GroupStore) -> None:
    gid = group.group_id
    names = {tid: name for name, (tid, _) in group.subscription_metadata.items()}
    ids = {name: tid for name, (tid, _) in group.subscription_metadata.items()}
    counts = {name: n for name, (_, n) in group.subscription_metadata.items()}
    assignor = ASSIGNORS[group.preferred_assignor(store.config.consumer_assignors[0])]
    subscriptions = {
        mid: MemberSubscription(
            frozenset(group.member_topics(m)),
            {names[t]: frozenset(ps) for t, ps in group.target.get(mid, {}).items() if t in names},
            m.rack_id,
        )
        for mid, m in group.members.items()
    }
    result = assignor(subscriptions, counts)
    for mid, by_name in result.items():
        target: Assignment = {ids[name]: set(ps) for name, ps in by_name.items() if ps}
        if target != group.target.get(mid):
            group.target[mid] = target
            out.emit(
                rec.ConsumerGroupTargetAssignmentMemberKey(gid, mid),
                rec.ConsumerGroupTargetAssignmentMemberValue(rec.topic_id_partitions(target)),
            )
    group.assignment_epoch = group.group_epoch
    out.emit(
        rec.ConsumerGroupTargetAssignmentMetadataKey(gid),
        rec.ConsumerGroupTargetAssignmentMetadataValue(group.assignment_epoch),
    )
