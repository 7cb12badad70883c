"""TLS on either side of the proxy, each independent of the other.

The client side is a Kafka SSL listener named PROXY: its certificate and client authentication
come from Kafka's ssl.* properties (or listener.name.proxy.ssl.*), read and built by the broker's
own code (config/security.py, server/network/tls.py). The upstream side is a TLS client that
checks the brokers' certificates against proxy.upstream.ssl.truststore.location (or the system's
CAs) and, by default, their host names.
"""

from __future__ import annotations

import ssl

from kcompat.config.errors import ConfigError
from kcompat.config.listener_security import parse_security
from kcompat.config.listeners import Listener
from kcompat.config.proxy_config import ProxyConfig
from kcompat.server.network.tls import server_context

LISTENER = "PROXY"


def client_side_context(config: ProxyConfig) -> ssl.SSLContext | None:
    """The bootstrap and node listeners' TLS context; None for PLAINTEXT."""
    protocol = config.get("proxy.client.security.protocol")
    if protocol not in ("SSL", "SASL_SSL"):
        return None
    host, port = config.bootstrap
    security = parse_security([Listener(LISTENER, host, port, protocol)], config.security_props)[LISTENER]
    assert security.ssl is not None
    return server_context(security.ssl)


def upstream_context(config: ProxyConfig) -> ssl.SSLContext | None:
    """The TLS context of the proxy's connections to the upstream; None for PLAINTEXT."""
    if config.get("proxy.upstream.security.protocol") not in ("SSL", "SASL_SSL"):
        return None
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    cafile = config.get("proxy.upstream.ssl.truststore.location")
    if cafile:
        try:
            ctx.load_verify_locations(cafile=cafile)
        except (OSError, ssl.SSLError) as e:
            raise ConfigError(
                f"proxy.upstream.ssl.truststore.location={cafile!r} cannot be used: {getattr(e, 'strerror', None) or e}",
                key="proxy.upstream.ssl.truststore.location",
            ) from None
    if not config.get("proxy.upstream.ssl.endpoint.identification.algorithm"):
        ctx.check_hostname = False
    return ctx
