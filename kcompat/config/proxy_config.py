"""`kcompat proxy`'s properties, in the style of the broker's: a properties file, then
--override key=value (and the CLI's shorthands, which are overrides by another name).

    proxy.upstream.bootstrap.servers   host:port[,host:port...] of the cluster behind the proxy
    proxy.bootstrap.listener           host:port clients bootstrap from
    proxy.node.port.base               node n is served on port base + n
    proxy.advertised.host              the host put in every rewritten answer
    proxy.admin.listener               host:port of the /faults and /captures HTTP API (optional)
    proxy.virtual.clusters             names of virtual clusters (tenants), each with its own
                                       proxy.virtual.cluster.NAME.{bootstrap.listener,node.port.base,prefix}
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kcompat.config.definition import Check, ConfigDef, OneOf, TypedAttributes, at_least, between, table
from kcompat.config.errors import ConfigError
from kcompat.config.listener_security import is_security_key
from kcompat.config.load import parse_override
from kcompat.config.properties_file import read_properties_file
from kcompat.config.shorthand import HIGH, INT, LIST, LONG, LOW, MEDIUM, STRING, prop

_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

log = logging.getLogger("kcompat.config")


def _host_port(text: str) -> bool:
    _, sep, port = text.rpartition(":")
    return bool(sep) and port.isdigit() and 0 <= int(port) <= 65535


HOST_PORT = Check(lambda v: v is None or _host_port(v), "host:port")
HOST_PORTS = Check(lambda v: bool(v) and all(_host_port(x) for x in v), "a list of host:port")

PROXY_CONFIGS: dict[str, ConfigDef] = table(
    [
        prop(
            "proxy.upstream.bootstrap.servers",
            LIST,
            [],
            "host:port of the upstream cluster's brokers the proxy bootstraps from (required).",
            HIGH,
            HOST_PORTS,
        ),
        prop(
            "proxy.bootstrap.listener",
            STRING,
            "127.0.0.1:9192",
            "host:port of the bootstrap listener clients are given as bootstrap.servers.",
            HIGH,
            HOST_PORT,
        ),
        prop(
            "proxy.node.port.base",
            INT,
            9193,
            "Upstream node n is served on port base + n (Kroxylicious' portIdentifiesNode), on the bootstrap "
            "listener's host.",
            HIGH,
            between(1, 65535),
        ),
        prop(
            "proxy.node.id.max",
            INT,
            1000,
            "The largest node id served; a node above it is left out with one log line. "
            "proxy.node.port.base + proxy.node.id.max must be a port.",
            MEDIUM,
            at_least(0),
        ),
        prop(
            "proxy.advertised.host",
            STRING,
            None,
            "The host written into every answer that names a node (default: the bootstrap listener's).",
            HIGH,
        ),
        prop(
            "proxy.metadata.refresh.ms",
            LONG,
            30000,
            "How often the proxy asks the upstream for its brokers and opens listeners for new node ids.",
            MEDIUM,
            at_least(100),
        ),
        prop(
            "proxy.connect.timeout.ms",
            INT,
            10000,
            "How long a connection to an upstream broker may take before the client's connection is closed.",
            MEDIUM,
            at_least(1),
        ),
        prop(
            "proxy.buffer.bytes",
            INT,
            4 << 20,
            "Bytes waiting to be written to one side before the proxy stops reading the other side "
            "(backpressure, both directions).",
            LOW,
            at_least(1024),
        ),
        prop(
            "proxy.admin.listener",
            STRING,
            None,
            "host:port of an HTTP listener for fault rules (/faults) and traffic captures (/captures), "
            "the same API as kcompat serve's admin.listener, and the compatibility report (/proxy/clients, "
            "/metrics) (default: none, and no request is decoded).",
            MEDIUM,
            HOST_PORT,
        ),
        prop(
            "proxy.capture.dir",
            STRING,
            None,
            "Directory a capture of kind log writes its JSON lines file into (default: log captures are "
            "refused; records captures need none).",
            LOW,
        ),
        prop(
            "proxy.client.security.protocol",
            STRING,
            "PLAINTEXT",
            "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL between clients and the proxy; with SSL the proxy's "
            "certificate comes from Kafka's ssl.* properties (ssl.keystore.location, ...), with SASL the "
            "proxy authenticates clients itself by Kafka's sasl.* properties (sasl.enabled.mechanisms, "
            "listener.name.proxy.<mechanism>.sasl.jaas.config, connections.max.reauth.ms), optionally "
            "prefixed listener.name.proxy.",
            HIGH,
            OneOf(_PROTOCOLS),
        ),
        prop(
            "proxy.upstream.security.protocol",
            STRING,
            "PLAINTEXT",
            "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL between the proxy and the upstream brokers "
            "(independent of the client side); with SASL the proxy logs in with its own credentials "
            "(proxy.upstream.sasl.*) and re-authenticates before the broker's session ends.",
            HIGH,
            OneOf(_PROTOCOLS),
        ),
        prop(
            "proxy.upstream.sasl.mechanism",
            STRING,
            "PLAIN",
            "The SASL mechanism the proxy logs in to the upstream with.",
            MEDIUM,
            OneOf(("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")),
        ),
        prop(
            "proxy.upstream.sasl.jaas.config",
            STRING,
            None,
            "The proxy's own upstream credentials, as a Kafka client's sasl.jaas.config: a login module "
            'with username="..." password="..." (PLAIN, SCRAM), or unsecuredLoginStringClaim_sub="..." '
            '(OAUTHBEARER, an unsecured token) or token="<jws>".',
            MEDIUM,
        ),
        prop(
            "proxy.upstream.ssl.truststore.location",
            STRING,
            None,
            "PEM file of the CA certificates the upstream brokers' certificates are checked against "
            "(default: the system's).",
            MEDIUM,
        ),
        prop(
            "proxy.upstream.ssl.endpoint.identification.algorithm",
            STRING,
            "https",
            "https: an upstream certificate must name the host the proxy connects to; empty: not checked.",
            LOW,
        ),
        prop(
            "proxy.sni.host.pattern",
            STRING,
            None,
            "SNI routing: every node on the bootstrap listener's port, advertised as this host name with "
            "$(nodeId) replaced by the node id (e.g. broker-$(nodeId).example.com); the TLS server name a "
            "client asks for picks the node. Needs proxy.client.security.protocol=SSL (default: port routing).",
            MEDIUM,
            Check(lambda v: v is None or v.count("$(nodeId)") == 1, "a host name with $(nodeId) once"),
        ),
        prop(
            "proxy.virtual.clusters",
            LIST,
            [],
            "Names of virtual clusters (tenants) served by this proxy, each on its own listeners "
            "(proxy.virtual.cluster.NAME.bootstrap.listener, .node.port.base) with its topics, groups and "
            "transactional ids under its own prefix upstream (.prefix, default NAME.); when set, "
            "proxy.bootstrap.listener is not served.",
            MEDIUM,
        ),
        prop(
            "socket.request.max.bytes",
            INT,
            104857600,
            "Largest request frame accepted from a client; a larger size prefix closes that connection.",
            HIGH,
            at_least(1),
        ),
    ]
)


_VC = "proxy.virtual.cluster."
_VC_KEYS = ("bootstrap.listener", "node.port.base", "prefix")


@dataclass(frozen=True)
class VirtualCluster:
    name: str
    bootstrap_listener: str
    node_port_base: int
    prefix: str


class ProxyConfig(TypedAttributes):
    """The proxy's typed settings; `ProxyConfig(props)` or `load_proxy_config(...)`."""

    _definitions = PROXY_CONFIGS

    def __init__(self, props: Mapping[str, str] | None = None, *, warn: bool = False) -> None:
        self._values: dict[str, Any] = {}
        self.unknown: dict[str, str] = {}
        self.security_props: dict[str, str] = {}  # ssl.*, listener.name.proxy.*: the client side's TLS
        self.raw = dict(props or {})
        vc_props: dict[str, str] = {}
        for key, raw in (props or {}).items():
            if key.startswith(_VC):
                vc_props[key] = raw
                continue
            definition = PROXY_CONFIGS.get(key)
            if definition is None and is_security_key(key):
                self.security_props[key] = raw
                continue
            if definition is None:
                self.unknown[key] = raw
                if warn:
                    log.warning("unknown proxy property %s=%r ignored", key, raw)
                continue
            self._values[key] = definition.parse(raw)
        if not self.get("proxy.upstream.bootstrap.servers"):
            raise ConfigError(
                "proxy.upstream.bootstrap.servers is required: give --upstream host:port[,host:port...]",
                key="proxy.upstream.bootstrap.servers",
            )
        if self.get("proxy.node.port.base") + self.get("proxy.node.id.max") > 65535:
            raise ConfigError(
                "proxy.node.port.base + proxy.node.id.max is over 65535: lower either",
                key="proxy.node.id.max",
            )
        if self.get("proxy.sni.host.pattern") and self.get("proxy.client.security.protocol") != "SSL":
            raise ConfigError(
                "proxy.sni.host.pattern needs proxy.client.security.protocol=SSL (the node is read from TLS)",
                key="proxy.sni.host.pattern",
            )
        self.virtual_clusters = _virtual_clusters(self.get("proxy.virtual.clusters"), vc_props)

    def for_virtual_cluster(self, vc: VirtualCluster) -> ProxyConfig:
        """This configuration with the virtual cluster's listeners."""
        own = {k: v for k, v in self.raw.items() if not k.startswith(_VC) and k != "proxy.virtual.clusters"}
        own["proxy.bootstrap.listener"] = vc.bootstrap_listener
        own["proxy.node.port.base"] = str(vc.node_port_base)
        return ProxyConfig(own)

    def get(self, name: str) -> Any:
        if name in self._values:
            return self._values[name]
        return PROXY_CONFIGS[name].default

    @property
    def upstreams(self) -> list[tuple[str, int]]:
        return [split_host_port(x) for x in self.get("proxy.upstream.bootstrap.servers")]

    @property
    def bootstrap(self) -> tuple[str, int]:
        return split_host_port(self.get("proxy.bootstrap.listener"))

    @property
    def advertised_host(self) -> str:
        return str(self.get("proxy.advertised.host") or self.bootstrap[0])


def _virtual_clusters(names: list[str], props: dict[str, str]) -> list[VirtualCluster]:
    out: list[VirtualCluster] = []
    for key in props:
        name, _, setting = key[len(_VC) :].partition(".")
        if name not in names or setting not in _VC_KEYS:
            raise ConfigError(
                f"{key}: not a setting of a virtual cluster named in proxy.virtual.clusters "
                f"(proxy.virtual.cluster.NAME.{{{','.join(_VC_KEYS)}}})",
                key=key,
            )
    prefixes: dict[str, str] = {}
    for name in names:
        listener, base, prefix = (props.get(f"{_VC}{name}.{k}") for k in _VC_KEYS)
        if listener is None or not _host_port(listener):
            raise ConfigError(f"{_VC}{name}.bootstrap.listener: a host:port is required", key=f"{_VC}{name}")
        if base is None or not base.isdigit() or not 1 <= int(base) <= 65535:
            raise ConfigError(f"{_VC}{name}.node.port.base: a port is required", key=f"{_VC}{name}")
        prefix = f"{name}." if prefix is None else prefix
        other = next((n for n, p in prefixes.items() if p.startswith(prefix) or prefix.startswith(p)), None)
        if not prefix or other is not None:
            raise ConfigError(
                f"{_VC}{name}.prefix: {prefix!r} must be non-empty and not overlap virtual cluster {other}'s "
                "(one tenant's names would be another's)",
                key=f"{_VC}{name}.prefix",
            )
        prefixes[name] = prefix
        out.append(VirtualCluster(name, listener, int(base), prefix))
    return out


def split_host_port(text: str) -> tuple[str, int]:
    host, _, port = text.strip().rpartition(":")
    return host.strip("[]"), int(port)


def load_proxy_config(
    path: str | Path | None = None, overrides: Iterable[str] | Mapping[str, str] = (), *, warn: bool = True
) -> ProxyConfig:
    """Properties from a file, then overrides (later wins)."""
    merged: dict[str, str] = dict(read_properties_file(path)) if path is not None else {}
    pairs = overrides.items() if isinstance(overrides, Mapping) else (parse_override(o) for o in overrides)
    merged.update(pairs)
    return ProxyConfig(merged, warn=warn)
