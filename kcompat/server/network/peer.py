"""The peer of a client connection, as the broker's handlers see it (kcompat.server.network.connection)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Client:
    """The peer of a connection, passed to Broker.handle with each of its requests."""

    connection_id: str  # Kafka's form: "localHost:localPort-peerHost:peerPort-index"
    host: str
    port: int
    listener: str  # listener name, e.g. PLAINTEXT
    security_protocol: str
    # Kafka's KafkaPrincipal as one string: User:ANONYMOUS, the SASL user, or the mTLS-mapped name
    principal: str = "User:ANONYMOUS"
    # SASL/SCRAM with a delegation token (Kafka's KafkaPrincipal.tokenAuthenticated): such a
    # connection may not create, renew, expire or describe tokens
    token_authenticated: bool = False

    @property
    def origin(self) -> str:
        """The listener's address and the client's host: a client reconnecting keeps it (log keys)."""
        return f"{self.connection_id.partition('-')[0]} {self.host} "

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
