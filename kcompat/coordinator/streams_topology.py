"""A streams group's topology and what the topics make of it (Kafka's ConfiguredTopology).

A member sends the topology when it joins: subtopologies, each with its source topics, the
repartition topics it writes and reads, its changelog topics and copartition groups. Against the
topics that exist it is configured: each subtopology's task count is the most partitions of its
source topics; a repartition topic without a fixed count gets the most partitions of the source
topics of the subtopologies writing it; a changelog topic gets its subtopology's task count;
copartitioned topics must agree. Internal topics that do not exist yet are returned for the
broker to create (MISSING_INTERNAL_TOPICS); a missing source topic is MISSING_SOURCE_TOPICS; an
internal topic that exists with another partition count, or copartitioned source topics that
disagree, is INCORRECTLY_PARTITIONED_TOPICS. Until all is well the group is NotReady.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kcompat.wire.types import streams_group_heartbeat as sgh

# StreamsGroupHeartbeatResponse Status codes (the 4.3.1 spec's list).
STALE_TOPOLOGY = 0
MISSING_SOURCE_TOPICS = 1
INCORRECTLY_PARTITIONED_TOPICS = 2
MISSING_INTERNAL_TOPICS = 3
SHUTDOWN_APPLICATION = 4
ASSIGNMENT_DELAYED = 5


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: int = 0  # 0: no fixed count
    replication_factor: int = 0  # 0: the broker's default
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    source_topic_regex: tuple[str, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()
    # each group: (indexes into source_topics, indexes into repartition_source_topics)
    copartition_groups: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] = ()


@dataclass(frozen=True)
class StreamsTopology:
    epoch: int
    subtopologies: tuple[Subtopology, ...]

    def source_topic_names(self) -> set[str]:
        names: set[str] = set()
        for s in self.subtopologies:
            names.update(s.source_topics)
            names.update(t.name for t in s.repartition_source_topics)
        return names


@dataclass(frozen=True)
class InternalTopic:
    """An internal topic the broker must create."""

    name: str
    partitions: int
    replication_factor: int
    configs: tuple[tuple[str, str], ...]


@dataclass
class StreamsHeartbeatResult:
    """A heartbeat's answer, and the internal topics the broker must create first. Here, not in
    streams_group_heartbeat.py, so the broker's handler can build a refusal without loading it."""

    response: sgh.StreamsGroupHeartbeatResponse
    create: list[InternalTopic] = field(default_factory=list)


@dataclass
class ConfiguredTopology:
    tasks: dict[str, int] = field(default_factory=dict)  # subtopology id -> number of tasks
    missing_internal: list[InternalTopic] = field(default_factory=list)
    statuses: list[tuple[int, str]] = field(default_factory=list)
    # the topics the configuration depended on, with their partition counts: a change re-plans
    inputs: tuple[tuple[str, int], ...] = ()
    internal: dict[str, int] = field(default_factory=dict)  # internal topic -> its partition count

    @property
    def ready(self) -> bool:
        return not self.statuses


class InvalidTopology(ValueError):
    """STREAMS_INVALID_TOPOLOGY: the topology cannot be configured (a cycle of repartition topics, ...)."""


def summarize_topics(names: list[str]) -> str:
    """Kafka 4.3.1's InternalTopicManager.summarizeTopics: at most three names, then a count (Kafka
    lists missing internal topics in its HashMap's order; kcompat sorts them)."""
    if not names:
        return "<none>"
    more = f" and {len(names) - 3} additional topics" if len(names) > 3 else ""
    return ", ".join(names[:3]) + more


def configure(topology: StreamsTopology, partitions_of: Mapping[str, int]) -> ConfiguredTopology:
    """The topology against the existing topics (`partitions_of`: topic name -> partition count)."""
    used: dict[str, int] = {}

    def existing(name: str) -> int | None:
        n = partitions_of.get(name)
        if n is not None:
            used[name] = n
        return n

    subs = topology.subtopologies
    missing_sources = sorted({t for s in subs for t in s.source_topics if existing(t) is None})
    if missing_sources:
        return ConfiguredTopology(
            statuses=[
                (MISSING_SOURCE_TOPICS, f"Source topics {summarize_topics(missing_sources)} are missing.")
            ],
            inputs=tuple(sorted(used.items())),
        )
    repartition = _repartition_counts(subs, existing)
    incorrect = _copartition(subs, used, repartition)
    tasks: dict[str, int] = {}
    for s in subs:
        inputs = [used[t] for t in s.source_topics] + [
            repartition[r.name] for r in s.repartition_source_topics
        ]
        tasks[s.subtopology_id] = max(inputs, default=0)
    wanted: dict[str, InternalTopic] = {}
    for s in subs:
        for t in s.repartition_source_topics:
            wanted[t.name] = InternalTopic(t.name, repartition[t.name], t.replication_factor, t.configs)
        for t in s.state_changelog_topics:
            wanted[t.name] = InternalTopic(t.name, tasks[s.subtopology_id], t.replication_factor, t.configs)
    missing: list[InternalTopic] = []
    for name, want in sorted(wanted.items()):
        have = existing(name)
        if have is None:
            missing.append(want)
        elif have != want.partitions:
            incorrect.append(name)
    statuses = []
    if missing:
        listed = summarize_topics([t.name for t in missing])
        statuses.append((MISSING_INTERNAL_TOPICS, f"Internal topics are missing: {listed}"))
    if incorrect:
        detail = f"Following topics are not correctly partitioned: [{', '.join(sorted(set(incorrect)))}]"
        statuses.append((INCORRECTLY_PARTITIONED_TOPICS, detail))
    internal = {name: t.partitions for name, t in wanted.items()}
    return ConfiguredTopology(tasks, missing, statuses, tuple(sorted(used.items())), internal)


def _copartition(
    subs: tuple[Subtopology, ...], used: Mapping[str, int], repartition: dict[str, int]
) -> list[str]:
    """Give copartitioned repartition topics without a fixed count their group's count; return the
    source topics of groups whose partition counts disagree."""
    incorrect: list[str] = []
    for s in subs:
        for group_src, group_rep in s.copartition_groups:
            copart = {s.source_topics[i]: used[s.source_topics[i]] for i in group_src}
            if len(set(copart.values())) > 1:
                incorrect.extend(sorted(copart))
                continue
            fixed = next(iter(copart.values()), None)
            if fixed is None:
                fixed = max(
                    (repartition[s.repartition_source_topics[i].name] for i in group_rep), default=None
                )
            for i in group_rep:
                if s.repartition_source_topics[i].partitions == 0 and fixed is not None:
                    repartition[s.repartition_source_topics[i].name] = fixed
    return incorrect


def _repartition_counts(
    subs: tuple[Subtopology, ...], existing: Callable[[str], int | None]
) -> dict[str, int]:
    """Each repartition topic's partition count: its fixed one, else the most of its writers' inputs."""
    fixed = {t.name: t.partitions for s in subs for t in s.repartition_source_topics if t.partitions > 0}
    writers: dict[str, list[Subtopology]] = {}
    for s in subs:
        for name in s.repartition_sink_topics:
            writers.setdefault(name, []).append(s)
    counts: dict[str, int] = dict(fixed)

    def count(name: str, seen: frozenset[str]) -> int:
        if name in counts:
            return counts[name]
        if name in seen:
            raise InvalidTopology(f"Cycle of repartition topics through {name}.")
        best = 0
        for w in writers.get(name, []):
            for src in w.source_topics:
                best = max(best, existing(src) or 0)
            for rep in w.repartition_source_topics:
                best = max(best, count(rep.name, seen | {name}))
        if best == 0:
            raise InvalidTopology(f"Cannot determine the number of partitions of repartition topic {name}.")
        counts[name] = best
        return best

    for s in subs:
        for t in s.repartition_source_topics:
            count(t.name, frozenset())
    return counts
