"""Per-listener security settings, named and resolved as Kafka resolves them.

    listener.name.<listener>.<setting>   (listener name lower-case) overrides the broker-wide <setting>;
    listener.name.<listener>.<mechanism>.sasl.jaas.config  is the JAAS config of one SASL mechanism.

Only the listeners whose protocol needs them read the ssl.* (SSL, SASL_SSL) and sasl.*
(SASL_PLAINTEXT, SASL_SSL) settings, and only they import this module (listener_security.py
resolves every listener); a listener that cannot work (an SSL listener without a
keystore, a SASL listener without a mechanism kcompat speaks) stops start-up with one line.
Files are only named here: the TLS context that reads them is kcompat.server.network.tls's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from kcompat.config.errors import ConfigError
from kcompat.config.security_lookup import SettingLookup

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
# OAUTHBEARER tokens are checked by Kafka's unsecured validator (alg none, for development), the
# default, or by its JWKS validator (signed JWTs; its 3.x name is still accepted by Kafka 4).
_UNSECURED_VALIDATOR = "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler"
JWKS_VALIDATORS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
)
_JWKS_SCHEMES = ("file:", "http:", "https:")
CLIENT_AUTH = ("none", "requested", "required")
TLS_PROTOCOLS = ("TLSv1.2", "TLSv1.3")
KEYSTORE_TYPES = ("PEM", "PKCS12")


@dataclass(frozen=True)
class SslSettings:
    keystore_type: str | None  # None: read the file and tell PEM from PKCS12
    keystore_location: str | None
    keystore_password: str | None
    key_password: str | None
    keystore_certificate_chain: str | None  # inline PEM
    keystore_key: str | None  # inline PEM
    truststore_type: str | None
    truststore_location: str | None
    truststore_password: str | None
    truststore_certificates: str | None  # inline PEM
    client_auth: str
    enabled_protocols: tuple[str, ...]
    cipher_suites: tuple[str, ...]
    principal_mapping_rules: str


@dataclass(frozen=True)
class OAuthSettings:
    """The sasl.oauthbearer.* settings of Kafka's JWKS validator (OAuthBearerValidatorCallbackHandler)."""

    jwks_url: str
    refresh_ms: int = 3600000
    expected_audience: tuple[str, ...] = ()
    expected_issuer: str | None = None
    scope_claim: str = "scope"
    sub_claim: str = "sub"
    clock_skew_s: int = 30


@dataclass(frozen=True)
class SaslSettings:
    mechanisms: tuple[str, ...]
    jaas: Mapping[str, str] = field(default_factory=dict)  # mechanism -> its JAAS config text
    max_receive_size: int = 524288
    oauth: OAuthSettings | None = None  # OAUTHBEARER with signed JWTs; None: the unsecured validator


def ssl_settings(look: SettingLookup, listener: str) -> SslSettings:
    keystore_type = look.get("ssl.keystore.type")
    if keystore_type is not None and keystore_type.upper() == "JKS":
        raise ConfigError(
            f"{look.key('ssl.keystore.type')}=JKS is not supported: convert the keystore with "
            "`keytool -importkeystore -deststoretype PKCS12` or use PEM",
            key="ssl.keystore.type",
        )
    keystore_type = look.one_of("ssl.keystore.type", KEYSTORE_TYPES, upper=True)
    truststore_type = look.get("ssl.truststore.type")
    if truststore_type is not None and truststore_type.upper() == "JKS":
        raise ConfigError(
            f"{look.key('ssl.truststore.type')}=JKS is not supported: use PKCS12 or PEM",
            key="ssl.truststore.type",
        )
    truststore_type = look.one_of("ssl.truststore.type", KEYSTORE_TYPES, upper=True)
    location, chain, key = (
        look.get("ssl.keystore.location"),
        look.get("ssl.keystore.certificate.chain"),
        look.get("ssl.keystore.key"),
    )
    # A listener naming its own keystore (a file or inline PEM) takes none of the broker-wide one.
    if look.local("ssl.keystore.certificate.chain") and not look.local("ssl.keystore.location"):
        location = None
    elif look.local("ssl.keystore.location") and not look.local("ssl.keystore.certificate.chain"):
        chain = key = None
    if location is None and chain is None:
        raise ConfigError(
            f"listener {listener} uses TLS and needs a certificate: set "
            "ssl.keystore.location (PEM or PKCS12) or ssl.keystore.certificate.chain and ssl.keystore.key",
            key="listeners",
        )
    if location is not None and chain is not None:
        raise ConfigError(
            "set either ssl.keystore.location or ssl.keystore.certificate.chain, not both",
            key="ssl.keystore.location",
        )
    if chain is not None and key is None:
        raise ConfigError("ssl.keystore.certificate.chain needs ssl.keystore.key", key="ssl.keystore.key")
    protocols = look.items("ssl.enabled.protocols")
    for protocol in protocols:
        if protocol not in TLS_PROTOCOLS:
            raise ConfigError(
                f"{look.key('ssl.enabled.protocols')} names {protocol!r}: kcompat offers {', '.join(TLS_PROTOCOLS)}",
                key="ssl.enabled.protocols",
                value=protocol,
            )
    if not protocols:
        raise ConfigError("ssl.enabled.protocols is empty", key="ssl.enabled.protocols")
    return SslSettings(
        keystore_type=keystore_type,
        keystore_location=location,
        keystore_password=look.get("ssl.keystore.password"),
        key_password=look.get("ssl.key.password"),
        keystore_certificate_chain=chain,
        keystore_key=key,
        truststore_type=truststore_type,
        truststore_location=look.get("ssl.truststore.location"),
        truststore_password=look.get("ssl.truststore.password"),
        truststore_certificates=look.get("ssl.truststore.certificates"),
        client_auth=look.one_of("ssl.client.auth", CLIENT_AUTH) or "none",
        enabled_protocols=protocols,
        cipher_suites=look.items("ssl.cipher.suites"),
        principal_mapping_rules=look.get("ssl.principal.mapping.rules") or "DEFAULT",
    )


def sasl_settings(look: SettingLookup, listener: str) -> SaslSettings:
    mechanisms = tuple(m.upper() for m in look.items("sasl.enabled.mechanisms"))
    if not mechanisms:
        raise ConfigError(
            f"listener {listener} uses SASL: set sasl.enabled.mechanisms (or "
            f"listener.name.{listener.lower()}.sasl.enabled.mechanisms) to some of {', '.join(SASL_MECHANISMS)}",
            key="listeners",
        )
    for mechanism in mechanisms:
        if mechanism not in SASL_MECHANISMS:
            raise ConfigError(
                f"{look.key('sasl.enabled.mechanisms')} names {mechanism}: kcompat speaks {', '.join(SASL_MECHANISMS)}",
                key="sasl.enabled.mechanisms",
                value=mechanism,
            )
    jaas = {}
    for mechanism in mechanisms:
        text = look.get(f"{mechanism.lower()}.sasl.jaas.config") or look.get("sasl.jaas.config")
        if text is not None:
            jaas[mechanism] = text
    if "PLAIN" in mechanisms and "PLAIN" not in jaas:
        raise ConfigError(
            f"listener {listener} enables PLAIN but has no users: set "
            f'listener.name.{listener.lower()}.plain.sasl.jaas.config to a PlainLoginModule with user_<name>="<password>"',
            key="sasl.jaas.config",
        )
    oauth = None
    if "OAUTHBEARER" in mechanisms:
        handler = look.get("oauthbearer.sasl.server.callback.handler.class") or look.get(
            "sasl.server.callback.handler.class"
        )
        if handler in JWKS_VALIDATORS:
            oauth = _oauth_settings(look, listener)
        elif handler is not None and handler != _UNSECURED_VALIDATOR:
            raise ConfigError(
                f"OAUTHBEARER with {handler} is not supported: kcompat offers Kafka's "
                f"{JWKS_VALIDATORS[0]} (signed JWTs) and its unsecured validator (the default, for development)",
                key="sasl.server.callback.handler.class",
                value=handler,
            )
    return SaslSettings(mechanisms, jaas, look.int("sasl.server.max.receive.size", 1), oauth)


def _oauth_settings(look: SettingLookup, listener: str) -> OAuthSettings:
    """The JWKS validator's settings: listener.name.<l>.oauthbearer.<setting>, or as SettingLookup finds them."""

    def get(name: str) -> str | None:
        return look.get(f"oauthbearer.{name}") or look.get(name)

    def number(name: str) -> int:
        key = f"oauthbearer.{name}" if look.get(f"oauthbearer.{name}") else name
        return look.int(key)

    url = get("sasl.oauthbearer.jwks.endpoint.url")
    if url is None or not url.lower().startswith(_JWKS_SCHEMES):
        raise ConfigError(
            f"listener {listener} validates OAUTHBEARER tokens with {JWKS_VALIDATORS[0]}: set "
            "sasl.oauthbearer.jwks.endpoint.url to the identity provider's JWKS (file://, http:// or https://)",
            key="sasl.oauthbearer.jwks.endpoint.url",
            value=url,
        )
    audience = get("sasl.oauthbearer.expected.audience") or ""
    return OAuthSettings(
        jwks_url=url,
        refresh_ms=max(1, number("sasl.oauthbearer.jwks.endpoint.refresh.ms")),
        expected_audience=tuple(a.strip() for a in audience.split(",") if a.strip()),
        expected_issuer=get("sasl.oauthbearer.expected.issuer"),
        scope_claim=get("sasl.oauthbearer.scope.claim.name") or "scope",
        sub_claim=get("sasl.oauthbearer.sub.claim.name") or "sub",
        clock_skew_s=number("sasl.oauthbearer.clock.skew.seconds"),
    )


# JAAS: `<LoginModule class> <flag> key="value" key=value ... ;` (one module, as Kafka requires
# for sasl.jaas.config).
_JAAS = re.compile(
    r"\s*(?P<module>[\w.$]+)\s+(?P<flag>required|requisite|sufficient|optional)(?P<options>.*?);\s*",
    re.DOTALL,
)
_JAAS_OPTION = re.compile(r'\s*(?P<key>[^\s=]+)\s*=\s*(?:"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<bare>[^\s;"]+))')


@dataclass(frozen=True)
class JaasEntry:
    module: str
    options: Mapping[str, str]


def parse_jaas(text: str, key: str = "sasl.jaas.config") -> JaasEntry:
    m = _JAAS.fullmatch(text)
    if m is None:
        raise ConfigError(
            f"{key} is invalid: expected '<LoginModule> required key=\"value\" ...;' (one login module)",
            key=key,
        )
    options: dict[str, str] = {}
    rest = m.group("options")
    pos = 0
    while rest[pos:].strip():
        o = _JAAS_OPTION.match(rest, pos)
        if o is None:
            raise ConfigError(
                f'{key} is invalid near {rest[pos:].strip()[:20]!r}: expected key="value"', key=key
            )
        value = o.group("quoted")
        options[o.group("key")] = re.sub(r"\\(.)", r"\1", value) if value is not None else o.group("bare")
        pos = o.end()
    return JaasEntry(m.group("module"), options)


def plain_users(text: str) -> dict[str, str]:
    """PlainLoginModule's users: its `user_<name>="<password>"` options."""
    return {k[5:]: v for k, v in parse_jaas(text).options.items() if k.startswith("user_")}
