"""The two ways a client call fails: the cluster answered with an error, or no broker answered."""

from __future__ import annotations

from kcompat.wire.error_codes import ErrorCode


class KafkaError(Exception):
    """A non-zero Kafka error code, named as Kafka names it, with what was being done."""

    def __init__(self, code: int, context: str = "", message: str | None = None) -> None:
        self.code = code
        self.context = context
        self.detail = message
        super().__init__(self.line())

    @property
    def name(self) -> str:
        try:
            return ErrorCode(self.code).name  # type: ignore[call-arg]  # by value: IntEnum lookup
        except ValueError:
            return f"UNKNOWN_ERROR_CODE_{self.code}"

    def line(self) -> str:
        where = f"{self.context}: " if self.context else ""
        detail = f" ({self.detail})" if self.detail else ""
        return f"{where}{self.name}{detail}"


class CannotConnect(Exception):
    """No broker could be reached (refused, timed out, closed mid-answer)."""


def check(code: int, context: str, message: str | None = None) -> None:
    if code:
        raise KafkaError(code, context, message)
