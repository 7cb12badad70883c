"""Listeners: one parser (kcompat.config) for every form `listeners` / `advertised.listeners` take,
the typed result the server opens, and the controller listeners it leaves closed."""

from __future__ import annotations

import socket

import pytest

from kcompat.config import BrokerConfig, ConfigError, Listener
from kcompat.config.listeners import parse_listener, parse_listeners
from kcompat.server.network.listeners import bind

# Every form either of the two former parsers (kcompat/config/listeners.py and
# kcompat/server/network/listeners.py, whose regexes differed) took, and what the one parser makes of it.
# "config" / "server": which of the old parsers accepted the entry.
ACCEPTED = [
    # entry                               config server  -> name, host, port
    ("PLAINTEXT://127.0.0.1:9092",        True,  True,   ("PLAINTEXT", "127.0.0.1", 9092)),
    ("PLAINTEXT://:9092",                 True,  True,   ("PLAINTEXT", "", 9092)),  # every interface
    ("plaintext://localhost:9092",        True,  True,   ("PLAINTEXT", "localhost", 9092)),  # names upper-cased
    ("  PLAINTEXT://h:1  ",               True,  True,   ("PLAINTEXT", "h", 1)),  # spaces around an entry
    ("INTERNAL://[::1]:9093",             True,  True,   ("INTERNAL", "::1", 9093)),
    ("INTERNAL://[::]:9093",              True,  True,   ("INTERNAL", "::", 9093)),
    ("PLAINTEXT://[fe80::1%eth0]:9092",   True,  True,   ("PLAINTEXT", "fe80::1%eth0", 9092)),  # a zone
    ("CLIENT_1://host-name.example:0",    True,  True,   ("CLIENT_1", "host-name.example", 0)),  # a free port
    ("MY-LISTENER://h:65535",             True,  True,   ("MY-LISTENER", "h", 65535)),
    ("MY.LISTENER://h:1",                 False, True,   ("MY.LISTENER", "h", 1)),  # Kafka takes any name
    ("PLAINTEXT://[my-host_1]:9092",      False, True,   ("PLAINTEXT", "my-host_1", 9092)),  # Kafka too
]  # fmt: skip

REJECTED = [
    # entry                               config server  -> message
    ("localhost:9092",                    False, False,  "expected NAME://host:port"),
    ("PLAINTEXT://h",                     False, False,  "expected NAME://host:port"),
    ("PLAINTEXT://h:port",                False, False,  "expected NAME://host:port"),
    ("PLAINTEXT://::1:9092",              False, False,  "expected NAME://host:port"),  # IPv6 needs brackets
    ("PLAINTEXT://[::1:9092",             False, False,  "expected NAME://host:port"),
    ("://h:1",                            False, False,  "expected NAME://host:port"),
    ("PLAINTEXT://h:99999",               False, False,  r"port must be in \[0, 65535\]"),
    ("PLAINTEXT://h:-1",                  False, False,  r"port must be in \[0, 65535\]"),
    # The server's parser took a '/' in a host, but the config's always ran first and refused it,
    # as Kafka's EndPoint does: kept refused.
    ("PLAINTEXT://a/b:9092",              False, True,   "expected NAME://host:port"),
]  # fmt: skip


@pytest.mark.parametrize(("entry", "old_config", "old_server", "expected"), ACCEPTED)
def test_every_accepted_form(
    entry: str, old_config: bool, old_server: bool, expected: tuple[str, str, int]
) -> None:
    assert old_config or old_server
    listener = parse_listener("listeners", entry)
    assert (listener.name, listener.host, listener.port) == expected
    # and it round-trips through its URL (brackets back around an IPv6 host)
    assert parse_listener("listeners", listener.url()) == listener


@pytest.mark.parametrize(("entry", "old_config", "old_server", "message"), REJECTED)
def test_every_refused_form(entry: str, old_config: bool, old_server: bool, message: str) -> None:
    assert not old_config
    with pytest.raises(ConfigError, match=message):
        parse_listener("listeners", entry)


def test_the_security_protocol_comes_from_the_map_or_the_name() -> None:
    parsed = parse_listeners(
        "listeners",
        ["PLAINTEXT://:1", "CLIENT://:2", "SSL://:3", "OTHER://:4"],
        {"CLIENT": "PLAINTEXT", "SSL": "SSL"},
    )
    assert [(x.name, x.security_protocol) for x in parsed] == [
        ("PLAINTEXT", "PLAINTEXT"), ("CLIENT", "PLAINTEXT"), ("SSL", "SSL"), ("OTHER", ""),
    ]  # fmt: skip
    with pytest.raises(ConfigError, match="names listener A more than once"):
        parse_listeners("listeners", ["A://:1", "a://:2"])


def test_kafka_combined_mode_listeners_open_the_broker_listener_only() -> None:
    cfg = BrokerConfig({
        "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://:9093",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL",
        "controller.listener.names": "controller",
    })  # fmt: skip
    assert cfg.listeners == [Listener("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT")]
    assert cfg.controller_listeners == [Listener("CONTROLLER", "", 9093, "PLAINTEXT")]
    assert cfg.controller_listener_names == ("CONTROLLER",)
    assert cfg.listener_security_protocol_map == {
        "CONTROLLER": "PLAINTEXT",
        "PLAINTEXT": "PLAINTEXT",
        "SSL": "SSL",
    }


def test_an_unmapped_controller_listener_is_skipped_not_refused() -> None:
    # Kafka maps a controller listener missing from listener.security.protocol.map to PLAINTEXT.
    cfg = BrokerConfig({
        "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://:9093",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
    })  # fmt: skip
    assert [x.name for x in cfg.listeners] == ["PLAINTEXT"]
    assert cfg.controller_listeners == [Listener("CONTROLLER", "", 9093, "PLAINTEXT")]
    # a broker listener with no protocol is still an error
    with pytest.raises(ConfigError, match="listeners entry INTERNAL://:9094 has no security protocol"):
        BrokerConfig(
            {"listeners": "PLAINTEXT://:9092,INTERNAL://:9094", "controller.listener.names": "CONTROLLER"}
        )


def test_a_served_listener_binds() -> None:
    (listener,) = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0"}).listeners
    sock = bind(listener, 5)
    try:
        host, port = sock.getsockname()[:2]
        assert host == "127.0.0.1" and port > 0
        assert sock.type == socket.SOCK_STREAM and not sock.getblocking()
    finally:
        sock.close()
