"""The group coordinator's settings, named and defaulted as Kafka 4.x's broker configs."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CoordinatorConfig:
    # Classic protocol
    group_initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    group_min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    group_max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    group_max_size: int = 2**31 - 1  # group.max.size
    new_member_join_timeout_ms: int = 300_000  # Kafka's fixed new-member JoinGroup timeout (5 min)
    # Offsets
    offsets_retention_minutes: int = 10080  # offsets.retention.minutes (7 days)
    offsets_retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    # KIP-848 consumer groups
    consumer_session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    consumer_heartbeat_interval_ms: int = 5000  # group.consumer.heartbeat.interval.ms
    consumer_max_size: int = 2**31 - 1  # group.consumer.max.size
    consumer_assignors: tuple[str, ...] = (
        "uniform",
        "range",
        "roundrobin",
    )  # group.consumer.assignors; first = default
    # KIP-1071 streams groups
    streams_initial_rebalance_delay_ms: int = 3000  # group.streams.initial.rebalance.delay.ms
    streams_assignment_interval_ms: int = 1000  # group.streams.assignment.interval.ms

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000
