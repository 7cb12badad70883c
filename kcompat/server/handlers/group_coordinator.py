"""The group coordinator as the group and offset handlers call it (no API of its own).

The group logic is kcompat.coordinator's; the handlers translate wire versions to its plain values
and back, and hand it their call through `coordinate`, which runs it on ctx.groups (records stored
before any answer; see kcompat/server/groups/group_service.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from kcompat.server.context import RequestContext
from kcompat.server.dispatcher import CloseConnection
from kcompat.server.groups.group_service import CoordinatorUnavailable
from kcompat.wire.error_codes import ErrorCode

if TYPE_CHECKING:
    from kcompat.coordinator.result import CoordinatorResult

T = TypeVar("T")

# READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS: Kafka 4's operations on a group resource.
GROUP_OPERATIONS = sum(1 << op for op in (3, 6, 8, 10, 11))


async def coordinate(
    ctx: RequestContext,
    call: Callable[[int], CoordinatorResult[T]],
    *,
    creates: bool = True,
    group: str | None = None,
    refuse: Callable[[ErrorCode], T] | None = None,
    committed: bool = False,
) -> T:
    """The coordinator's answer to `call` (stored first, awaited when deferred). Cluster mode:
    `refuse(error)` answers for `group` when this broker does not coordinate it (group_service.run)."""
    try:
        answer: T = await ctx.groups.run(
            call, creates=creates, group=group, refuse=refuse, committed=committed
        )
        return answer
    except CoordinatorUnavailable:
        raise CloseConnection("the group coordinator is shutting down") from None


def client_host(ctx: RequestContext) -> str:
    """Kafka shows a member's host as InetAddress.toString does: "/127.0.0.1"."""
    host = getattr(ctx.client, "host", None)
    return f"/{host}" if host else ""
