"""Connection creation rates (Kafka's ConnectionQuotas, KIP-612), in Kafka's windowed Rate over the
client quotas' window:
- `connection_creation_rate` of `ip` entities: new connections a second from one address. A quota
  on an address applies to it; one on the `<default>` ip to each address on its own.
- `max.connection.creation.rate`, broker-wide: over it the acceptor waits out the throttle time
  before it serves the connection, and accepts no other meanwhile (they wait in the backlog).

Over an ip's quota, Kafka takes the connection back out of the rate and neither serves nor closes it
at once: the acceptor holds the socket and closes it when the throttle time (at most one quota
window) is over, so a client that reconnects in a loop is slowed down rather than spun. The
Reactor does the holding; this class decides for how long.
"""

from __future__ import annotations

from kcompat.config.connection_limits import address as _address
from kcompat.quotas.entities import CONNECTION_CREATION_RATE, IP, QuotaTable
from kcompat.quotas.rate import QuotaWindow, Rate

__all__ = ["ConnectionQuotas"]


class ConnectionQuotas:
    __slots__ = ("_broker", "_default", "_per_ip", "_rates", "on", "window")

    def __init__(self, window: QuotaWindow) -> None:
        self.window = window
        self.on = False
        self._per_ip: dict[str, float] = {}
        self._default: float | None = None
        self._rates: dict[str, Rate] = {}
        self._broker = Rate(window)

    def update(self, table: QuotaTable) -> None:
        per_ip: dict[str, float] = {}
        default = None
        for entity, values in table.items():
            bound = values.get(CONNECTION_CREATION_RATE)
            if bound is None or len(entity) != 1 or entity[0][0] != IP:
                continue
            name = entity[0][1]
            if name is None:
                default = bound
            else:
                per_ip[_address(name)] = bound
        self._per_ip, self._default = per_ip, default
        self.on = default is not None or bool(per_ip)
        # a rate measured under an old bound stays: Kafka keeps the sensor and changes its quota
        self._rates = {ip: r for ip, r in self._rates.items() if ip in per_ip or default is not None}

    def admit(self, host: str, now_ms: int) -> int:
        """Record a new connection from `host`: 0 to serve it, else how long (ms) to hold it before
        closing it; a refused connection is not counted in the rate (Kafka unrecords it)."""
        if not self.on:
            return 0
        ip = _address(host)
        bound = self._per_ip.get(ip, self._default)
        if bound is None:
            return 0
        rate = self._rates.get(ip)
        if rate is None:
            rate = self._rates[ip] = Rate(self.window)
        throttle = rate.record(1.0, bound, now_ms)
        if throttle <= 0:
            return 0
        rate.add(-1.0, now_ms)
        return min(throttle, self.window.window_ms)  # QuotaUtils.boundedThrottleTime

    def broker_rate(self, bound: float, now_ms: int) -> int:
        """Record a new connection against max.connection.creation.rate (`bound`): 0, or how long
        (ms) the acceptor waits before it takes the connection (and any other)."""
        return min(self._broker.record(1.0, bound, now_ms), self.window.window_ms)
