"""The server's listener parsing: which listeners are opened and which are skipped."""

from __future__ import annotations

import pytest

from kcompat.config.errors import ConfigError
from kcompat.server.listeners import Listener, parse_listeners, parse_protocol_map


def test_kafka_combined_mode_listeners_open_the_broker_listener_only() -> None:
    opened, skipped = parse_listeners(
        "PLAINTEXT://:9092,CONTROLLER://:9093",
        parse_protocol_map("CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL"),
        ["CONTROLLER"],
    )
    assert opened == [Listener("PLAINTEXT", "PLAINTEXT", "", 9092)]
    assert skipped == [Listener("CONTROLLER", "PLAINTEXT", "", 9093)]


def test_an_unmapped_controller_listener_is_skipped_not_refused() -> None:
    # Kafka maps a controller listener missing from listener.security.protocol.map to PLAINTEXT.
    opened, skipped = parse_listeners("PLAINTEXT://127.0.0.1:9092,CONTROLLER://:9093", None, ["CONTROLLER"])
    assert [x.name for x in opened] == ["PLAINTEXT"]
    assert skipped == [Listener("CONTROLLER", "PLAINTEXT", "", 9093)]
    # a broker listener with no protocol is still an error
    with pytest.raises(ConfigError, match="listener name INTERNAL has no security protocol"):
        parse_listeners("PLAINTEXT://:9092,INTERNAL://:9094", None, ["CONTROLLER"])
