"""A listener's value of a security setting, found as Kafka finds it: its listener-prefixed form
(listener.name.<listener lower-case>.<setting>), else the broker-wide setting, else Kafka's default.
Used by listener_security.py for every listener, and by security.py for the TLS and SASL settings."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kcompat.config.errors import ConfigError

# Kafka's defaults (BrokerSecurityConfigs, SslConfigs); sasl.enabled.mechanisms is GSSAPI in Kafka,
# which kcompat does not speak, so a SASL listener must name its mechanisms.
_DEFAULTS = {
    "ssl.client.auth": "none",
    "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
    "ssl.principal.mapping.rules": "DEFAULT",
    "connections.max.reauth.ms": "0",
    "connection.failed.authentication.delay.ms": "100",
    "sasl.server.max.receive.size": "524288",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": "3600000",
    "sasl.oauthbearer.clock.skew.seconds": "30",
    "sasl.oauthbearer.scope.claim.name": "scope",
    "sasl.oauthbearer.sub.claim.name": "sub",
}


class SettingLookup:
    """A listener's value of a setting: its listener-prefixed form, else the broker-wide one, else Kafka's default."""

    def __init__(self, props: Mapping[str, str], listener: str) -> None:
        self._props = props
        self._prefix = f"listener.name.{listener.lower()}."

    def local(self, name: str) -> bool:
        """True when the listener-prefixed form of `name` is set."""
        return self._prefix + name in self._props

    def key(self, name: str) -> str:
        """The key a value was read from (the listener-prefixed one when set), for messages."""
        return self._prefix + name if self._prefix + name in self._props else name

    def get(self, name: str) -> str | None:
        for key in (self._prefix + name, name):
            if key in self._props:
                value = self._props[key].strip()
                return value or None
        return _DEFAULTS.get(name)

    def int(self, name: str, low: int = 0) -> int:
        raw = self.get(name) or "0"
        try:
            value = int(raw)
        except ValueError:
            value = low - 1
        if value < low:
            raise ConfigError(
                f"{self.key(name)}={raw!r} is invalid: expected an integer >= {low}", key=name, value=raw
            )
        return value

    def items(self, name: str) -> tuple[str, ...]:
        return tuple(item.strip() for item in (self.get(name) or "").split(",") if item.strip())

    def one_of(self, name: str, allowed: Iterable[str], *, upper: bool = False) -> str | None:
        value = self.get(name)
        if value is None:
            return None
        value = value.upper() if upper else value.lower()
        if value not in allowed:
            raise ConfigError(
                f"{self.key(name)}={value!r} is invalid: expected one of {', '.join(allowed)}",
                key=name,
                value=value,
            )
        return value
