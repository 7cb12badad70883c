"""Opening a listener: the parsing of `listeners` (names, hosts, security protocols, controller
listeners, security settings) is kcompat.config's, done once at load; this module binds the
result and builds each listener's transport (TLS context, SASL authenticator)."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from kcompat.config.listener_security import ListenerSecurity
from kcompat.config.listeners import Listener
from kcompat.server.network.tls import PrincipalMapper, server_context, subject_dn
from kcompat.server.network.tls_socket import TlsSocket
from kcompat.storage.scram_credentials import ScramCredential

if TYPE_CHECKING:
    from kcompat.server.auth.delegation_tokens import TokenCredential
    from kcompat.server.auth.sasl import SaslAuthenticator


def bind(listener: Listener, backlog: int) -> socket.socket:
    """A listening, non-blocking socket for `listener` (OSError when the address is unusable)."""
    host = listener.host or "0.0.0.0"
    infos = socket.getaddrinfo(host, listener.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(backlog)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


@dataclass(frozen=True)
class ListenerTransport:
    """What a listener's connections need besides the socket: TLS, and the SASL exchange."""

    ssl_context: ssl.SSLContext | None = None
    # the principal of a TLS client (SSL listeners; on SASL_SSL the SASL user is the principal)
    tls_principal: Callable[[TlsSocket], str] | None = None
    authenticator: Callable[[], SaslAuthenticator] | None = None


def transports(
    security: Mapping[str, ListenerSecurity],
    scram_lookup: Callable[[str, str], ScramCredential | None],
    token_lookup: Callable[[str, str], TokenCredential | None] | None = None,
) -> dict[str, ListenerTransport]:
    """Each listener's transport; ConfigError when a keystore, truststore or rule cannot be used.
    `token_lookup`: the SCRAM credential of a delegation token (SCRAM with tokenauth=true)."""
    out = {}
    for name, settings in security.items():
        context = server_context(settings.ssl) if settings.ssl is not None else None
        principal = None
        if settings.ssl is not None and settings.sasl is None:
            principal = certificate_principal(PrincipalMapper(settings.ssl.principal_mapping_rules))
        authenticator = None
        if settings.sasl is not None:
            from kcompat.server.auth.sasl import SaslAuthenticator  # scramp: loaded only for SASL listeners

            validate = None
            if settings.sasl.oauth is not None:
                from kcompat.server.auth.oauth_jwks import JwksValidator  # pyjwt: only for this validator

                validate = JwksValidator(settings.sasl.oauth).validate  # one key set per listener
            authenticator = partial(SaslAuthenticator, settings, scram_lookup, validate)
            if token_lookup is not None:
                authenticator = partial(authenticator, token_lookup=token_lookup)
        out[name] = ListenerTransport(context, principal, authenticator)
    return out


def certificate_principal(mapper: PrincipalMapper) -> Callable[[TlsSocket], str]:
    def principal(sock: TlsSocket) -> str:
        der = sock.getpeercert(binary_form=True)
        return f"User:{mapper.name(subject_dn(der))}" if der else "User:ANONYMOUS"

    return principal
