"""The console's group actions, as kafka-consumer-groups does them with Kafka's own APIs.

    POST /action/group/delete          id: DeleteGroups (the group must be empty: NON_EMPTY_GROUP)
    POST /action/group/reset           id, topic (empty: every topic the group has committed or is
                                       assigned), to = earliest|latest|offset|timestamp, value,
                                       mode = preview|apply: ListOffsets for the targets, then
                                       (apply) OffsetCommit as an admin (generation -1, no member),
                                       which the coordinator accepts only while the group is empty
    POST /action/group/delete-offsets  id, topic: OffsetDelete (GROUP_SUBSCRIBED_TO_TOPIC while a
                                       member still reads it)

The preview lists each partition's committed offset and the one it would get; nothing is changed.
A group whose coordinator is another broker (cluster mode) answers NOT_COORDINATOR: use that
broker's console.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kcompat.server.admin.console import kafka_calls as k
from kcompat.server.admin.console import views
from kcompat.server.admin.console.kafka_calls import KafkaCalls, error_name

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from kcompat.admin_http.http_server import Form
    from kcompat.server.admin.console.session import Session
    from kcompat.server.broker import Broker

# (Kafka's error name or "NONE", what the page says[, a preview's rows: topic, partition, now, then])
Outcome = tuple[Any, ...]
EARLIEST, LATEST = -2, -1  # ListOffsets' special timestamps
STRATEGIES = ("earliest", "latest", "offset", "timestamp")


def _field(form: Form, name: str) -> str:
    values = form.fields.get(name)
    return values[0].strip() if values else ""


class GroupActions:
    def __init__(self, broker: Broker, kafka: KafkaCalls) -> None:
        self.broker = broker
        self.kafka = kafka

    def routes(self) -> dict[str, Callable[[Session, Form], Awaitable[Outcome]]]:
        return {
            "/action/group/delete": self.delete_group,
            "/action/group/reset": self.reset_offsets,
            "/action/group/delete-offsets": self.delete_offsets,
        }

    async def delete_group(self, session: Session, form: Form) -> Outcome:
        group = _field(form, "id")
        resp = await self.kafka.call(session.principal, form.peer, k.DELETE_GROUPS, {"groups_names": [group]})
        code = resp.results[0].error_code
        if code:
            return error_name(code), f"group {group} not deleted"
        return "NONE", f"deleted group {group}"

    def _partitions(self, group: str, topic: str) -> list[tuple[str, int, int | None]]:
        """(topic, partition, committed) the reset applies to: the group's, or every one of `topic`."""
        row = views.group(self.broker, group)
        known = {(r.topic, r.partition): r.committed for r in row.partitions} if row is not None else {}
        if topic:
            t = self.broker.metadata.topic(topic)
            if t is None:
                raise ValueError(f"no topic {topic}")
            return [(topic, p, known.get((topic, p))) for p in range(t.partitions)]
        if not known:
            raise ValueError(f"group {group} has no committed or assigned partition: name a topic")
        return [(t, p, c) for (t, p), c in sorted(known.items())]

    async def reset_offsets(self, session: Session, form: Form) -> Outcome:
        group, topic, to = _field(form, "id"), _field(form, "topic"), _field(form, "to")
        if to not in STRATEGIES:
            raise ValueError(f"reset to one of {', '.join(STRATEGIES)}")
        parts = self._partitions(group, topic)
        targets = await self._targets(session, form, parts, to)
        if isinstance(targets, tuple):
            return targets
        rows = [(t, p, "-" if c is None else str(c), str(targets[t, p])) for t, p, c in parts]
        if _field(form, "mode") != "apply":
            return "NONE", f"dry run: {len(rows)} partition(s) of group {group} would be reset to {to}", rows
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for t, p, _ in parts:
            by_topic.setdefault(t, []).append(
                {
                    "partition_index": p,
                    "committed_offset": targets[t, p],
                    "committed_leader_epoch": -1,
                    "committed_metadata": "",
                }
            )
        body = {
            "group_id": group,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        }
        resp = await self.kafka.call(session.principal, form.peer, k.OFFSET_COMMIT, body)
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code:
                    return error_name(
                        p.error_code
                    ), f"offsets of group {group} not reset ({t.name}-{p.partition_index})"
        return "NONE", f"reset {len(rows)} partition(s) of group {group} to {to}", rows

    async def _targets(
        self, session: Session, form: Form, parts: list[tuple[str, int, int | None]], to: str
    ) -> dict[tuple[str, int], int] | tuple[str, str]:
        """Each partition's new offset (an explicit offset kept within the log), or an error."""
        value = _field(form, "value")
        asked = {
            "earliest": (EARLIEST,),
            "latest": (LATEST,),
            "offset": (EARLIEST, LATEST),
            "timestamp": (int(value) if to == "timestamp" else 0, LATEST),
        }[to]
        answers: list[dict[tuple[str, int], int]] = []
        for stamp in asked:  # ListOffsets takes one timestamp per partition: one request each
            by_topic: dict[str, list[dict[str, Any]]] = {}
            for t, p, _ in parts:
                by_topic.setdefault(t, []).append(
                    {"partition_index": p, "current_leader_epoch": -1, "timestamp": stamp}
                )
            topics = [{"name": t, "partitions": ps} for t, ps in by_topic.items()]
            body = {"replica_id": -1, "isolation_level": 0, "topics": topics}
            resp = await self.kafka.call(session.principal, form.peer, k.LIST_OFFSETS, body)
            found: dict[tuple[str, int], int] = {}
            for rt in resp.topics:
                for rp in rt.partitions:
                    if rp.error_code:
                        return error_name(rp.error_code), f"no offsets for {rt.name}-{rp.partition_index}"
                    found[rt.name, rp.partition_index] = rp.offset
            answers.append(found)
        if to == "offset":
            low, high = answers
            return {tp: min(max(int(value), low[tp]), high[tp]) for tp in low}
        if to == "timestamp":  # no record at or after it: the log end, as kafka-consumer-groups
            at, end = answers
            return {tp: at[tp] if at[tp] >= 0 else end[tp] for tp in at}
        return answers[0]

    async def delete_offsets(self, session: Session, form: Form) -> Outcome:
        group, topic = _field(form, "id"), _field(form, "topic")
        t = self.broker.metadata.topic(topic)
        if t is None:
            raise ValueError(f"no topic {topic}")
        body = {
            "group_id": group,
            "topics": [{"name": topic, "partitions": [{"partition_index": p} for p in range(t.partitions)]}],
        }
        resp = await self.kafka.call(session.principal, form.peer, k.OFFSET_DELETE, body)
        if resp.error_code:
            return error_name(resp.error_code), f"offsets of group {group} on {topic} not deleted"
        for rt in resp.topics:
            for rp in rt.partitions:
                if rp.error_code:
                    return error_name(rp.error_code), f"offsets of {topic}-{rp.partition_index} not deleted"
        return "NONE", f"deleted group {group}'s offsets on {topic}"
