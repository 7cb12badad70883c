"""A streams group written by Kafka 4.3.1's group coordinator and taken over by kcompat's (a
partition of `__consumer_offsets` moving from a Java broker to a kcompat one).

`golden/kafka_4_3_streams_group.hex`: the first eight records (key and value, hex) a Kafka 4.3.1
broker wrote for Streams app `migrating` (one StreamThread, two subtopologies of four tasks each),
copied from the log of the default-format migration round: member metadata, topology, group
epoch 2, current assignment (epoch 1, nothing yet), group epoch 3, target assignment, assignment
epoch 3, and the current assignment that gives the member all eight tasks at epoch 3, STABLE.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import kcompat.coordinator.records as rec
from kcompat.coordinator import GroupCoordinator
from kcompat.coordinator.result import Effects
from kcompat.coordinator.streams_group import StreamsGroup, StreamsMember, StreamsMemberState, TaskSet
from kcompat.coordinator.streams_group_records import emit_current_assignment
from kcompat.coordinator.streams_records import StreamsGroupCurrentMemberAssignmentValue
from kcompat.wire.error_codes import ErrorCode as E
from kcompat.wire.types import streams_group_heartbeat as sgh

from .harness import FAST

GOLDEN = Path(__file__).parent / "golden" / "kafka_4_3_streams_group.hex"
GROUP, MEMBER = "migrating", "dGRSMVN8QuuDF6_TPbnjRg"
ALL = {"0": {0, 1, 2, 3}, "1": {0, 1, 2, 3}}
TOPICS = ("lines", "labels", "words-repartition", "counts-changelog", "labels-changelog")


def java_records() -> list[tuple[bytes, bytes | None]]:
    out: list[tuple[bytes, bytes | None]] = []
    for line in GOLDEN.read_text().splitlines():
        key, value = line.split()
        out.append((bytes.fromhex(key), None if value == "None" else bytes.fromhex(value)))
    return out


def loaded(records: list[tuple[bytes, bytes | None]]) -> tuple[GroupCoordinator, StreamsGroup]:
    topics = {f"{GROUP}-{t}": (uuid.uuid4(), 4) for t in TOPICS}
    coordinator = GroupCoordinator(FAST, topic_metadata=lambda: topics)
    coordinator.load(records, 0)
    group = coordinator.groups[GROUP]
    assert isinstance(group, StreamsGroup)
    return coordinator, group


def test_a_member_java_left_stable_is_stable_here() -> None:
    """Kafka's streams MemberState bytes are STABLE 1, UNREVOKED_TASKS 2, UNRELEASED_TASKS 3 (not
    the consumer group's 0-2): read as 0-2, Java's STABLE member became one with tasks to revoke,
    its group Reconciling."""
    coordinator, group = loaded(java_records())
    m = group.members[MEMBER]
    assert (m.state, m.member_epoch, m.previous_member_epoch) == (StreamsMemberState.STABLE, 3, 1)
    assert m.assigned == TaskSet(ALL) and m.pending_revocation == {}
    assert (group.group_epoch, group.assignment_epoch, group.target[MEMBER]) == (3, 3, TaskSet(ALL))
    # The member's next heartbeat (epoch 3, as before the move) keeps it where it was.
    req = sgh.StreamsGroupHeartbeatRequest(
        group_id=GROUP, member_id=MEMBER, member_epoch=3, topology=None, user_endpoint=None
    )
    result = coordinator.streams_group_heartbeat(1000, req)
    assert result.response is not None
    answer = result.response.response
    assert (answer.error_code, answer.member_epoch) == (E.NONE, 3)
    assert group.state().value == "Stable" and group.group_epoch == 3
    assert result.records == []  # nothing to rewrite: no new epoch, no new assignment


def current_assignment(state: StreamsMemberState) -> tuple[object, dict[str, object]]:
    """The key and the value's fields of the StreamsGroupCurrentMemberAssignment record kcompat writes."""
    out = Effects()
    emit_current_assignment(
        out, GROUP, StreamsMember(MEMBER, member_epoch=3, previous_member_epoch=1, state=state)
    )
    (record,) = out.records
    decoded = rec.decode(record)
    assert decoded is not None and isinstance(decoded.value, StreamsGroupCurrentMemberAssignmentValue)
    return decoded.key, decoded.value.fields


def test_kcompat_writes_kafkas_member_state_bytes() -> None:
    for state, byte in [
        (StreamsMemberState.STABLE, 1),
        (StreamsMemberState.UNREVOKED_TASKS, 2),
        (StreamsMemberState.UNRELEASED_TASKS, 3),
    ]:
        assert current_assignment(state)[1]["state"] == byte


def test_java_states_two_and_three_and_unknown_replay() -> None:
    """A member Java left waiting for tasks (UNRELEASED_TASKS, 3) loads, where it used to stop the
    load with a ValueError; an unknown byte (Kafka's UNKNOWN, 127) is recomputed at the next
    heartbeat, never taken as stable."""
    *head, _ = java_records()
    for byte, state in [
        (2, StreamsMemberState.UNREVOKED_TASKS),
        (3, StreamsMemberState.UNRELEASED_TASKS),
        (127, StreamsMemberState.UNRELEASED_TASKS),
    ]:
        key, fields = current_assignment(StreamsMemberState.STABLE)
        record = rec.make(key, StreamsGroupCurrentMemberAssignmentValue({**fields, "state": byte}))  # type: ignore[arg-type]
        _, group = loaded([*head, (record.key, record.value)])
        assert group.members[MEMBER].state is state
