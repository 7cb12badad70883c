"""Client telemetry (KIP-714) as the broker holds it: Kafka's ClientMetricsManager
(kcompat.telemetry, about 3.5 ms of imports) is built on first use, the first
GetTelemetrySubscriptions or PushTelemetry, or the admin listener's /clients or /metrics.

Before that, ApiVersions (every client's first request) still says which software each connection
runs, and the manager matches subscriptions on it later: that much is kept here, and handed over
when the manager is built.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING
from uuid import UUID

if TYPE_CHECKING:
    from kcompat.telemetry.client_metrics import ClientMetricsManager


class ClientTelemetry:
    def __init__(self, max_bytes: Callable[[], int], new_id: Callable[[], UUID]) -> None:
        self._max_bytes = max_bytes  # telemetry.max.bytes
        self._new_id = new_id
        self._manager: ClientMetricsManager | None = None
        self._software: dict[str, tuple[str, str]] = {}  # connection id -> ApiVersions' name, version

    @property
    def manager(self) -> ClientMetricsManager:
        if self._manager is None:
            from kcompat.telemetry.client_metrics import ClientMetricsManager

            manager = ClientMetricsManager(self._max_bytes, self._new_id)
            for connection_id, (name, version) in self._software.items():
                manager.client_information(connection_id, name, version)
            self._software.clear()
            self._manager = manager
        return self._manager

    def client_information(self, connection_id: str, name: str, version: str) -> None:
        """ApiVersions v3+ named the client software on this connection."""
        if self._manager is None:
            self._software[connection_id] = (name, version)
        else:
            self._manager.client_information(connection_id, name, version)

    def connection_closed(self, connection_id: str) -> None:
        if self._manager is None:
            self._software.pop(connection_id, None)
        else:
            self._manager.connection_closed(connection_id)
