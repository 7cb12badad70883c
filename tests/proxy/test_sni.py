"""SNI routing (kcompat/proxy/sni.py): the host pattern, the node a TLS server name picks, the
endpoints advertised, and the properties that turn it on."""

from __future__ import annotations

import pytest

from kcompat.config.errors import ConfigError
from kcompat.config.proxy_config import ProxyConfig
from kcompat.proxy.node_map import NodeMap
from kcompat.proxy.sni import SniPattern

UPSTREAM = {"proxy.upstream.bootstrap.servers": "127.0.0.1:9092"}


def test_a_server_name_picks_its_node() -> None:
    pattern = SniPattern("broker-$(nodeId).example.com")
    assert pattern.host(3) == "broker-3.example.com"
    assert pattern.node_id("broker-3.example.com") == 3
    assert pattern.node_id("BROKER-12.Example.COM.") == 12  # DNS names: any case, a trailing dot
    for other in ("bootstrap.example.com", "broker-x.example.com", "broker-3.example.com.evil", "", None):
        assert pattern.node_id(other) is None  # the bootstrap servers
    with pytest.raises(ValueError):
        SniPattern("broker.example.com")


def test_nodes_are_advertised_on_one_port_by_name() -> None:
    nodes = NodeMap("proxy", 9200, 100, lambda n: None, sni=(SniPattern("b-$(nodeId).k.test"), 9192))
    assert nodes.endpoint(7) == ("b-7.k.test", 9192)


def test_sni_needs_tls_on_the_client_side() -> None:
    with pytest.raises(ConfigError, match="SSL"):
        ProxyConfig({**UPSTREAM, "proxy.sni.host.pattern": "broker-$(nodeId).example.com"})
    with pytest.raises(ConfigError):
        ProxyConfig({**UPSTREAM, "proxy.client.security.protocol": "SSL", "proxy.sni.host.pattern": "nope"})
