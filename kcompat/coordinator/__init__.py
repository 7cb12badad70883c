"""The group coordinator: consumer groups and committed offsets, in Kafka's terms, with no I/O and no clock.

Shaped as Kafka's group-coordinator module: a thin shard (GroupCoordinator, coordinator.py) composes
a GroupMetadataManager (classic and KIP-848 groups) and an OffsetMetadataManager; each operation
writes its records and deferred answers into the call's Effects value (result.py), and the shard
returns them as a CoordinatorResult.

What a server handler does
--------------------------
Make one `GroupCoordinator(config, topic_metadata=...)` per broker. `topic_metadata()` returns
{topic name: (topic id, partition count)} for the existing topics; KIP-848 groups ask it when they
compute assignments. Then, for each request, decode it, call the matching method with plain values
and the current time, and encode what comes back:

    FindCoordinator         answered by the server alone (this broker, key type 0)
    JoinGroup               join_group(now, group_id=, member_id=, protocol_type=, protocols=[JoinGroupProtocol],
                                       session_timeout_ms=, rebalance_timeout_ms=, group_instance_id=,
                                       client_id=, client_host=, require_known_member_id=(version >= 4))
    SyncGroup               sync_group(now, group_id=, member_id=, generation_id=, assignments=[SyncGroupAssignment],
                                       group_instance_id=, protocol_type=, protocol_name=)
    Heartbeat               heartbeat(now, group_id=, member_id=, generation_id=, group_instance_id=)
    LeaveGroup              leave_group(now, group_id=, members=[MemberIdentity])   (v0-2: one identity;
                                       answer with result.response.legacy_error_code)
    DescribeGroups          describe_groups(now, group_ids)
    ListGroups              list_groups(now, states_filter=, types_filter=)
    DeleteGroups            delete_groups(now, group_ids)
    OffsetCommit            commit_offsets(now, group_id=, topics=[OffsetCommitRequestTopic],
                                       generation_id_or_member_epoch=, member_id=, group_instance_id=,
                                       retention_time_ms= (v2-4), api_version=, partition_exists=callback)
    OffsetFetch             fetch_offsets(now, [OffsetFetchRequestGroup])  (v0-7: one group; its error_code
                                       is the top-level one from v2, below v2 put it on every partition)
    OffsetDelete            delete_offsets(now, group_id=, topics=[OffsetDeleteRequestTopic])
    ConsumerGroupHeartbeat  consumer_group_heartbeat(now, ConsumerGroupHeartbeatRequest(...), api_version=,
                                       client_id=, client_host=)
    ConsumerGroupDescribe   consumer_group_describe(now, group_ids)

The request/response values are the dataclasses in `messages.py`, with the JSON specs' field names
in snake_case; codec objects with the same attribute names can be passed where a method only
reads them (the topics/partitions of OffsetCommit, say).

What comes back: CoordinatorResult
----------------------------------
Every method returns a `CoordinatorResult` (Kafka's own pattern):

    response     the answer to send now, or None when it is deferred
    token        when deferred: the id under which a later result will carry the answer
    records      [(key bytes, value bytes | None)] to append to `__consumer_offsets`, in order
    completions  [Completion(token, response)]: earlier deferred requests this call answered

The handler must, in this order: append `records`; then send `response` (if any) and every
completion's response to the connection that is waiting under that token. Appending first is what
makes a committed offset or a stored assignment survive a crash once a client has seen it. A
record's group (for choosing the `__consumer_offsets` partition) is `records.group_of(decode_key(key))`,
and `records.offsets_partition(group_id, n)` is Kafka's choice of partition.

Deferred answers and time
-------------------------
JoinGroup waits until every member has rejoined (or the rebalance timeout passes, or the initial
rebalance delay ends); SyncGroup waits for the leader's assignment. The coordinator never sleeps:
a deferred call returns a token; whichever later call (another member's JoinGroup, the leader's
SyncGroup, a LeaveGroup, ...) or `tick(now)` ends the wait returns the answer as a completion.
After any call, `next_deadline_ms()` is the next time something is due (a session timeout, a
rebalance timeout, the initial delay, offset expiry); the server calls `tick(now)` at that time
and gets a `TickResult(records, completions, next_deadline_ms)`. Every method also fires what is
already due before doing its own work, so a late tick loses nothing. A connection that closes
while waiting simply drops its token; the coordinator's timers clean up the member.

Durability and replay
---------------------
On start-up, read every partition of `__consumer_offsets` from the beginning and pass the
(key, value) pairs, oldest first, to `load(records, now)`: later records win, tombstones delete, and
groups, generations, assignments, KIP-848 epochs and committed offsets come back as they were.
The formats are Kafka's own (OffsetCommitKey v1 / OffsetCommitValue v3, GroupMetadataKey v2 /
GroupMetadataValue v3, the ConsumerGroup* records), so Kafka's tools could read the topic.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kcompat.coordinator.config import CoordinatorConfig
    from kcompat.coordinator.coordinator import GroupCoordinator
    from kcompat.coordinator.messages import (
        ConsumerGroupHeartbeatRequest,
        JoinGroupProtocol,
        MemberIdentity,
        OffsetCommitRequestPartition,
        OffsetCommitRequestTopic,
        OffsetDeleteRequestTopic,
        OffsetFetchRequestGroup,
        OffsetFetchRequestTopic,
        SyncGroupAssignment,
        TopicPartitions,
    )
    from kcompat.coordinator.result import Completion, CoordinatorResult, TickResult

# Names load their module on first use (PEP 562): a broker that serves no group request never
# builds the coordinator, and `kcompat.coordinator.records` alone must not pull in every module.
_LAZY = {
    "CoordinatorConfig": "config",
    "GroupCoordinator": "coordinator",
    "Completion": "result",
    "CoordinatorResult": "result",
    "TickResult": "result",
}


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_LAZY.get(name, 'messages')}"), name)
    globals()[name] = value
    return value


__all__ = [
    "Completion",
    "ConsumerGroupHeartbeatRequest",
    "CoordinatorConfig",
    "CoordinatorResult",
    "GroupCoordinator",
    "JoinGroupProtocol",
    "MemberIdentity",
    "OffsetCommitRequestPartition",
    "OffsetCommitRequestTopic",
    "OffsetDeleteRequestTopic",
    "OffsetFetchRequestGroup",
    "OffsetFetchRequestTopic",
    "SyncGroupAssignment",
    "TickResult",
    "TopicPartitions",
]
