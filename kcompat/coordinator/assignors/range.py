"""Range: per topic, each subscriber gets one contiguous run of partitions.

For a topic with P partitions and N subscribers (sorted by member id), the first P mod N get
P div N + 1 partitions and the rest P div N, in order. Topics with the same partition count and the
same subscribers are therefore co-partitioned: one member gets partition k of each of them, which
is what joins over keyed topics rely on (Kafka's RangeAssignor). Not sticky.
"""

from __future__ import annotations

from collections.abc import Mapping

from kcompat.coordinator.assignors.subscription import GroupAssignment, MemberSubscription, empty_assignment


def assign(members: Mapping[str, MemberSubscription], topics: Mapping[str, int]) -> GroupAssignment:
    out = empty_assignment(members)
    for topic in sorted(topics):
        count = topics[topic]
        subscribers = sorted(m for m, s in members.items() if topic in s.topics)
        if not subscribers or count <= 0:
            continue
        quota, extra = divmod(count, len(subscribers))
        start = 0
        for i, m in enumerate(subscribers):
            n = quota + (1 if i < extra else 0)
            if n:
                out[m][topic] = list(range(start, start + n))
            start += n
    return out
