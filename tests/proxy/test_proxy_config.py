"""`kcompat proxy`'s properties: file, then --override (the CLI's shorthands are overrides)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kcompat.cli import build_parser
from kcompat.config.errors import ConfigError
from kcompat.config.proxy_config import load_proxy_config


def test_file_then_overrides(tmp_path: Path) -> None:
    path = tmp_path / "proxy.properties"
    path.write_text("proxy.upstream.bootstrap.servers=k1:9092,k2:9092\nproxy.node.port.base=40000\n")
    cfg = load_proxy_config(
        path, ["proxy.node.port.base=41000", "proxy.advertised.host=proxy.example"], warn=False
    )
    assert cfg.upstreams == [("k1", 9092), ("k2", 9092)]
    assert cfg.get("proxy.node.port.base") == 41000
    assert cfg.advertised_host == "proxy.example"
    assert cfg.bootstrap == ("127.0.0.1", 9192)


def test_advertised_host_defaults_to_the_bootstrap_listener_host() -> None:
    cfg = load_proxy_config(
        None, {"proxy.upstream.bootstrap.servers": "k:9092", "proxy.bootstrap.listener": "0.0.0.0:1"}
    )
    assert cfg.advertised_host == "0.0.0.0"


@pytest.mark.parametrize(
    ("props", "named"),
    [
        ({}, "proxy.upstream.bootstrap.servers is required"),
        ({"proxy.upstream.bootstrap.servers": "nohost"}, "host:port"),
        ({"proxy.upstream.bootstrap.servers": "k:1", "proxy.node.port.base": "65000"}, "over 65535"),
        ({"proxy.upstream.bootstrap.servers": "k:1", "proxy.bootstrap.listener": "x"}, "host:port"),
    ],
)
def test_invalid_settings_name_the_property(props: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        load_proxy_config(None, props, warn=False)


def test_cli_shorthands() -> None:
    args = build_parser(with_clients=False).parse_args(
        ["proxy", "--upstream", "k:9092", "--bootstrap", "127.0.0.1:1234", "--node-port-base", "2000"]
    )
    assert (args.command, args.upstream, args.bootstrap, args.node_port_base) == (
        "proxy",
        "k:9092",
        "127.0.0.1:1234",
        "2000",
    )
