"""The ssl.* and sasl.* properties Apache Kafka 4.3.1 defines (SslConfigs, SaslConfigs,
BrokerSecurityConfigs), for the unknown-property check: a misspelt security setting is warned
about with "did you mean", as any other key is, not silently kept.

The forms Kafka resolves per listener are checked by their setting:
    listener.name.<listener>.<setting>               listener.name.sasl_ssl.ssl.keystore.location
    listener.name.<listener>.<mechanism>.<setting>   listener.name.sasl_ssl.plain.sasl.jaas.config
"""

from __future__ import annotations

import difflib

KAFKA_SECURITY_KEYS = frozenset(
    {
        "sasl.client.callback.handler.class",
        "sasl.enabled.mechanisms",
        "sasl.jaas.config",
        "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.min.time.before.relogin",
        "sasl.kerberos.principal.to.local.rules",
        "sasl.kerberos.service.name",
        "sasl.kerberos.ticket.renew.jitter",
        "sasl.kerberos.ticket.renew.window.factor",
        "sasl.login.callback.handler.class",
        "sasl.login.class",
        "sasl.login.connect.timeout.ms",
        "sasl.login.read.timeout.ms",
        "sasl.login.refresh.buffer.seconds",
        "sasl.login.refresh.min.period.seconds",
        "sasl.login.refresh.window.factor",
        "sasl.login.refresh.window.jitter",
        "sasl.login.retry.backoff.max.ms",
        "sasl.login.retry.backoff.ms",
        "sasl.mechanism",
        "sasl.mechanism.inter.broker.protocol",
        "sasl.oauthbearer.allowed.files",
        "sasl.oauthbearer.allowed.urls",
        "sasl.oauthbearer.assertion.algorithm",
        "sasl.oauthbearer.assertion.claim.aud",
        "sasl.oauthbearer.assertion.claim.exp.seconds",
        "sasl.oauthbearer.assertion.claim.iss",
        "sasl.oauthbearer.assertion.claim.jti.include",
        "sasl.oauthbearer.assertion.claim.nbf.seconds",
        "sasl.oauthbearer.assertion.claim.sub",
        "sasl.oauthbearer.assertion.file",
        "sasl.oauthbearer.assertion.private.key.file",
        "sasl.oauthbearer.assertion.private.key.passphrase",
        "sasl.oauthbearer.assertion.template.file",
        "sasl.oauthbearer.client.credentials.client.id",
        "sasl.oauthbearer.client.credentials.client.secret",
        "sasl.oauthbearer.clock.skew.seconds",
        "sasl.oauthbearer.expected.audience",
        "sasl.oauthbearer.expected.issuer",
        "sasl.oauthbearer.header.urlencode",
        "sasl.oauthbearer.jwks.endpoint.refresh.ms",
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
        "sasl.oauthbearer.jwks.endpoint.url",
        "sasl.oauthbearer.jwt.retriever.class",
        "sasl.oauthbearer.jwt.validator.class",
        "sasl.oauthbearer.scope",
        "sasl.oauthbearer.scope.claim.name",
        "sasl.oauthbearer.sub.claim.name",
        "sasl.oauthbearer.token.endpoint.url",
        "sasl.server.callback.handler.class",
        "sasl.server.max.receive.size",
        "ssl.allow.dn.changes",
        "ssl.allow.san.changes",
        "ssl.cipher.suites",
        "ssl.client.auth",
        "ssl.enabled.protocols",
        "ssl.endpoint.identification.algorithm",
        "ssl.engine.factory.class",
        "ssl.key.password",
        "ssl.keymanager.algorithm",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.keystore.type",
        "ssl.principal.mapping.rules",
        "ssl.protocol",
        "ssl.provider",
        "ssl.secure.random.implementation",
        "ssl.trustmanager.algorithm",
        "ssl.truststore.certificates",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.truststore.type",
    }
)
_MECHANISMS = ("plain.", "scram-sha-256.", "scram-sha-512.", "oauthbearer.", "gssapi.")
_LISTENER = "listener.name."


def _setting(key: str) -> tuple[str, str]:
    """(prefix, setting): the listener and mechanism prefix of `key`, and the setting it names."""
    if not key.startswith(_LISTENER):
        return "", key
    listener, _, rest = key[len(_LISTENER) :].partition(".")
    prefix = f"{_LISTENER}{listener}."
    for mechanism in _MECHANISMS:
        if rest.startswith(mechanism):
            return prefix + mechanism, rest[len(mechanism) :]
    return prefix, rest


def unknown_security_key(key: str) -> str | None:
    """None when `key` is a security setting Kafka knows or not an ssl.*/sasl.* one; otherwise the
    hint to log after it: " (did you mean ssl.keystore.location?)", or "" when nothing is close."""
    prefix, setting = _setting(key)
    if not setting.startswith(("ssl.", "sasl.")) or setting in KAFKA_SECURITY_KEYS:
        return None
    close = difflib.get_close_matches(setting, KAFKA_SECURITY_KEYS, n=1, cutoff=0.8)
    return f" (did you mean {prefix}{close[0]}?)" if close else ""
