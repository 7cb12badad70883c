"""A fake server around GroupCoordinator: keeps the appended records, collects deferred answers by token."""

from __future__ import annotations

from typing import Any

from kcompat.coordinator import CoordinatorConfig, GroupCoordinator, JoinGroupProtocol
from kcompat.coordinator.consumer_protocol import encode_assignment, encode_subscription
from kcompat.coordinator.records import Record
from kcompat.coordinator.result import Completion, CoordinatorResult, TickResult

FAST = CoordinatorConfig(
    group_initial_rebalance_delay_ms=0,
    group_min_session_timeout_ms=1,
    streams_initial_rebalance_delay_ms=0,
    streams_assignment_interval_ms=0,  # test_streams_group_interval.py sets its own
)


def protocols(*names: str, topics: tuple[str, ...] = ("t",)) -> list[JoinGroupProtocol]:
    return [JoinGroupProtocol(n, encode_subscription(topics)) for n in names]


class Server:
    def __init__(self, config: CoordinatorConfig = FAST, **kw: Any) -> None:
        self.c = GroupCoordinator(config, **kw)
        self.log: list[Record] = []
        self.answers: dict[int, Any] = {}
        self.now = 0

    def _take(self, records: list[Record], completions: list[Completion]) -> None:
        self.log.extend(records)
        for done in completions:
            assert done.token not in self.answers, "a token was answered twice"
            self.answers[done.token] = done.response

    def call(self, method: str, *args: Any, **kw: Any) -> CoordinatorResult[Any]:
        result: CoordinatorResult[Any] = getattr(self.c, method)(self.now, *args, **kw)
        self._take(result.records, result.completions)
        assert (result.response is None) != (result.token is None)
        return result

    def advance(self, ms: int) -> TickResult:
        self.now += ms
        t = self.c.tick(self.now)
        self._take(t.records, t.completions)
        return t

    def answer(self, result: CoordinatorResult[Any]) -> Any:
        """The response: immediate, or the completion delivered for its token so far (None if none yet)."""
        if result.response is not None:
            return result.response
        assert result.token is not None
        return self.answers.get(result.token)

    # -- classic helpers
    def join(
        self,
        group: str,
        member_id: str = "",
        *,
        protos: list[JoinGroupProtocol] | None = None,
        session: int = 10_000,
        rebalance: int = 30_000,
        instance: str | None = None,
        client_id: str = "client",
        protocol_type: str = "consumer",
        v4: bool = False,
    ) -> CoordinatorResult[Any]:
        return self.call(
            "join_group",
            group_id=group,
            member_id=member_id,
            protocol_type=protocol_type,
            protocols=protos if protos is not None else protocols("range"),
            session_timeout_ms=session,
            rebalance_timeout_ms=rebalance,
            group_instance_id=instance,
            client_id=client_id,
            require_known_member_id=v4,
        )

    def sync(
        self,
        group: str,
        member_id: str,
        generation: int,
        assignments: dict[str, dict[str, list[int]]] | None = None,
        **kw: Any,
    ) -> CoordinatorResult[Any]:
        from kcompat.coordinator import SyncGroupAssignment

        given = [SyncGroupAssignment(m, encode_assignment(a)) for m, a in (assignments or {}).items()]
        return self.call(
            "sync_group",
            group_id=group,
            member_id=member_id,
            generation_id=generation,
            assignments=given,
            **kw,
        )

    def heartbeat(self, group: str, member_id: str, generation: int, instance: str | None = None) -> int:
        return int(
            self.call(
                "heartbeat",
                group_id=group,
                member_id=member_id,
                generation_id=generation,
                group_instance_id=instance,
            ).response.error_code
        )
