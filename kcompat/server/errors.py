"""The request-level error handlers raise (re-exported by broker.py, where handlers import it from)."""

from __future__ import annotations

from kcompat.log.errors import LogError
from kcompat.wire.error_codes import ErrorCode


class ApiError(Exception):
    """A request-level failure with the Kafka error code (and message) to answer with."""

    def __init__(
        self, error: ErrorCode, message: str | None = None, records: list[tuple[int, str]] | None = None
    ) -> None:
        super().__init__(message or error.name)
        self.error = error
        self.message = message
        self.records = records or []  # KIP-467: (batch_index, message) of each refused record

    @classmethod
    def from_log(cls, e: LogError) -> ApiError:
        """A storage engine failure as the Kafka error it names (the log package has no ErrorCode)."""
        return cls(ErrorCode[e.error_name], e.message)
