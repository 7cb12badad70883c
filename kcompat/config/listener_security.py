"""Which properties are security settings, and each served listener's: its protocol, and the TLS
and SASL settings that protocol needs.

    listener.name.<listener>.<setting>   (listener name lower-case) overrides the broker-wide <setting>.

Every BrokerConfig resolves its listeners here. The TLS, SASL and OAuth settings themselves (and
their dataclasses) are kcompat.config.security's, imported only for a listener that uses them: a
PLAINTEXT listener needs none of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kcompat.config.listeners import Listener
from kcompat.config.security_lookup import SettingLookup

if TYPE_CHECKING:
    from kcompat.config.security import SaslSettings, SslSettings

# Property families held raw by BrokerConfig and resolved here, per listener.
SECURITY_PREFIXES = ("ssl.", "sasl.", "listener.name.", "security.")
SECURITY_KEYS = frozenset({"connections.max.reauth.ms", "connection.failed.authentication.delay.ms"})


def is_security_key(key: str) -> bool:
    return key.startswith(SECURITY_PREFIXES) or key in SECURITY_KEYS


@dataclass(frozen=True)
class ListenerSecurity:
    name: str
    protocol: str
    ssl: SslSettings | None
    sasl: SaslSettings | None
    reauth_ms: int  # connections.max.reauth.ms; 0: sessions never expire
    failed_auth_delay_ms: int


def parse_security(listeners: Iterable[Listener], props: Mapping[str, str]) -> dict[str, ListenerSecurity]:
    """Each served listener's settings, by listener name; ConfigError names the first unusable one."""
    out: dict[str, ListenerSecurity] = {}
    for listener in listeners:
        look = SettingLookup(props, listener.name)
        protocol = listener.security_protocol
        ssl = sasl = None
        if protocol != "PLAINTEXT":  # the settings' dataclasses, loaded only for a listener that needs them
            from kcompat.config import security

            if protocol in ("SSL", "SASL_SSL"):
                ssl = security.ssl_settings(look, listener.name)
            if protocol.startswith("SASL_"):
                sasl = security.sasl_settings(look, listener.name)
                for mechanism, text in sasl.jaas.items():  # a malformed one stops start-up
                    security.parse_jaas(text, f"sasl.jaas.config of {mechanism}")
        out[listener.name] = ListenerSecurity(
            listener.name,
            protocol,
            ssl,
            sasl,
            reauth_ms=look.int("connections.max.reauth.ms"),
            failed_auth_delay_ms=look.int("connection.failed.authentication.delay.ms"),
        )
    return out
