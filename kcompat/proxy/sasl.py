"""SASL terminated at the proxy, both sides of it.

Client side: with proxy.client.security.protocol SASL_PLAINTEXT or SASL_SSL the proxy's listeners
are Kafka SASL listeners named PROXY, set up by Kafka's own properties (sasl.enabled.mechanisms,
listener.name.proxy.<mechanism>.sasl.jaas.config, connections.max.reauth.ms,
connection.failed.authentication.delay.ms) and served by the broker's SASL code: the exchange's
state table (kcompat.security.sasl_exchange) and its mechanisms (kcompat.server.auth.sasl), which
take only the listener's settings and a credential lookup, never the broker. SCRAM users are the
`user_<name>="<password>"` options of the SCRAM mechanism's JAAS config (the proxy has no
credential store); their SCRAM credentials are derived once, at start.

Upstream side: with proxy.upstream.security.protocol SASL_PLAINTEXT or SASL_SSL the proxy logs in
to each upstream connection with its own credentials (proxy.upstream.sasl.mechanism and
proxy.upstream.sasl.jaas.config, as a Kafka client's sasl.*), before any client request goes on.
UpstreamLogin is that exchange without I/O: frames out, answers in; it tells the session lifetime
the broker granted (KIP-368), which the upstream connection re-authenticates before (upstream.py).
"""

from __future__ import annotations

import base64
import json
import os
import struct
import time
from collections.abc import Callable
from typing import Any

from scramp import ScramClient, ScramMechanism
from scramp.utils import ScramException

from kcompat.config.errors import ConfigError
from kcompat.config.listener_security import parse_security
from kcompat.config.listeners import Listener
from kcompat.config.proxy_config import ProxyConfig
from kcompat.config.security import parse_jaas, plain_users
from kcompat.server.auth.sasl import SaslAuthenticator
from kcompat.storage.scram_credentials import ScramCredential
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.protocol import decode_response, encode_request

LISTENER = "PROXY"
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
HANDSHAKE_KEY, AUTHENTICATE_KEY = 17, 36
_HANDSHAKE_VERSION, _AUTHENTICATE_VERSION = 1, 2
_SCRAM_ITERATIONS = 4096
_CLIENT_ID = "kcompat-proxy"
_SIZE = struct.Struct(">i")


def client_authenticators(config: ProxyConfig) -> Callable[[], SaslAuthenticator] | None:
    """A new exchange per client connection; None when the client side has no SASL."""
    protocol = config.get("proxy.client.security.protocol")
    if protocol not in SASL_PROTOCOLS:
        return None
    host, port = config.bootstrap
    security = parse_security([Listener(LISTENER, host, port, protocol)], config.security_props)[LISTENER]
    assert security.sasl is not None
    if security.sasl.oauth is not None:
        raise ConfigError(
            "the proxy checks OAUTHBEARER tokens with Kafka's unsecured validator only: leave "
            "sasl.server.callback.handler.class unset on the proxy",
            key="sasl.server.callback.handler.class",
        )
    credentials: dict[tuple[str, str], ScramCredential] = {}
    for mechanism in security.sasl.mechanisms:
        if not mechanism.startswith("SCRAM-"):
            continue
        jaas = security.sasl.jaas.get(mechanism)
        users = plain_users(jaas) if jaas else {}
        if not users:
            raise ConfigError(
                f"the proxy enables {mechanism} but names no users: set "
                f"listener.name.proxy.{mechanism.lower()}.sasl.jaas.config to a ScramLoginModule with "
                'user_<name>="<password>"',
                key="sasl.jaas.config",
            )
        scram = ScramMechanism(mechanism)
        for user, password in users.items():
            salt, stored, server, iterations = scram.make_auth_info(
                password, iteration_count=_SCRAM_ITERATIONS
            )
            credentials[user, mechanism] = ScramCredential(salt, stored, server, iterations)

    def lookup(user: str, mechanism: str) -> ScramCredential | None:
        return credentials.get((user, mechanism))

    return lambda: SaslAuthenticator(security, lookup)


class LoginFailed(Exception):
    """The upstream refused the proxy's credentials; the message says why, in Kafka's words."""


class UpstreamLogin:
    """The proxy's login to one upstream connection: SaslHandshake v1, then SaslAuthenticate v2
    tokens. `first()` is the first frame; `answer(frame)` takes each answer (no size prefix) and
    gives the next frame, or None when logged in; `lifetime_ms` is then the session's (0: none)."""

    def __init__(self, mechanism: str, options: dict[str, str]) -> None:
        self.mechanism = mechanism
        self._options = options
        self._correlation = 0
        self._scram: ScramClient | None = None
        self._step = 0
        self.lifetime_ms = 0

    def _frame(self, key: int, version: int, body: dict[str, Any]) -> bytes:
        self._correlation += 1
        return encode_request(key, version, self._correlation, body, _CLIENT_ID)

    def first(self) -> bytes:
        self._step = 0
        return self._frame(HANDSHAKE_KEY, _HANDSHAKE_VERSION, {"mechanism": self.mechanism})

    def answer(self, frame: bytes | bytearray) -> bytes | None:
        if self._step == 0:
            _, handshake = decode_response(HANDSHAKE_KEY, _HANDSHAKE_VERSION, frame)
            if handshake.error_code != ErrorCode.NONE:
                raise LoginFailed(
                    f"{ErrorCode.of(handshake.error_code).name}: the upstream does not enable "
                    f"{self.mechanism} (it offers {', '.join(handshake.mechanisms) or 'none'})"
                )
            self._step = 1
            first = self._token(None)
            assert first is not None  # every mechanism speaks first
            return self._authenticate(first)
        _, auth = decode_response(AUTHENTICATE_KEY, _AUTHENTICATE_VERSION, frame)
        if auth.error_code != ErrorCode.NONE:
            raise LoginFailed(f"{ErrorCode.of(auth.error_code).name}: {auth.error_message or 'refused'}")
        token = self._token(bytes(auth.auth_bytes or b""))
        if token is None:
            self.lifetime_ms = int(auth.session_lifetime_ms or 0)
            return None
        return self._authenticate(token)

    def _authenticate(self, token: bytes) -> bytes:
        self._step += 1
        return self._frame(AUTHENTICATE_KEY, _AUTHENTICATE_VERSION, {"auth_bytes": token})

    def _token(self, server: bytes | None) -> bytes | None:
        """The next token for the server's last one (None: the first); None when done."""
        user, password = self._options.get("username", ""), self._options.get("password", "")
        if self.mechanism == "PLAIN":
            return f"\0{user}\0{password}".encode() if server is None else None
        if self.mechanism == "OAUTHBEARER":
            return f"n,,\x01auth=Bearer {self._jws()}\x01\x01".encode() if server is None else None
        try:
            if server is None:
                self._scram = ScramClient([self.mechanism], user, password)
                return str(self._scram.get_client_first()).encode()
            assert self._scram is not None
            if self._step == 2:
                self._scram.set_server_first(server.decode())
                return str(self._scram.get_client_final()).encode()
            self._scram.set_server_final(server.decode())
        except ScramException as e:
            raise LoginFailed(
                f"SASL_AUTHENTICATION_FAILED: the upstream's SCRAM answer fails ({e})"
            ) from None
        return None

    def _jws(self) -> str:
        """An unsecured JWS as Kafka's OAuthBearerLoginModule makes from its
        unsecuredLoginStringClaim_* options (or a token given as `token`)."""
        if "token" in self._options:
            return self._options["token"]
        now = int(time.time())
        claims: dict[str, Any] = {
            "iat": now,
            "exp": now + int(self._options.get("unsecuredLoginLifetimeSeconds", "3600")),
        }
        for key, value in self._options.items():
            if key.startswith("unsecuredLoginStringClaim_"):
                claims[key[len("unsecuredLoginStringClaim_") :]] = value
        claims.setdefault("sub", self._options.get("username", "kcompat-proxy"))
        return ".".join(_b64(part) for part in ({"alg": "none"}, claims)) + "."


def _b64(value: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


def upstream_login(config: ProxyConfig) -> Callable[[], UpstreamLogin] | None:
    """A new login per upstream connection; None when the upstream side has no SASL."""
    if config.get("proxy.upstream.security.protocol") not in SASL_PROTOCOLS:
        return None
    mechanism = config.get("proxy.upstream.sasl.mechanism")
    jaas = config.get("proxy.upstream.sasl.jaas.config")
    if not jaas:
        raise ConfigError(
            "proxy.upstream.security.protocol uses SASL: set proxy.upstream.sasl.jaas.config to the "
            f'proxy\'s own credentials (a {mechanism} login module with username="..." password="...")',
            key="proxy.upstream.sasl.jaas.config",
        )
    options = dict(parse_jaas(jaas, "proxy.upstream.sasl.jaas.config").options)
    return lambda: UpstreamLogin(mechanism, options)


def reauth_delay(lifetime_ms: int) -> float:
    """When to re-authenticate a session of `lifetime_ms` (seconds from now): at 85-95% of it,
    as Kafka's clients do, spread so connections do not all re-authenticate at once."""
    return lifetime_ms / 1000 * (0.85 + 0.1 * (os.urandom(1)[0] / 255))
