"""Group-config bounds read the broker's share heartbeat bounds from server.properties (as Kafka's
ShareGroupConfig), not Kafka's defaults: a broker run with 1 s share heartbeats accepts a group
config such as share.auto.offset.reset."""

from __future__ import annotations

import pytest

from kcompat.config.broker_config import BrokerConfig
from kcompat.config.errors import ConfigError
from kcompat.config.group_config import validate_group_configs


def test_share_heartbeat_bounds_come_from_the_broker_properties() -> None:
    broker = BrokerConfig({
        "group.share.min.heartbeat.interval.ms": "1000",
        "group.share.heartbeat.interval.ms": "1000",
    })  # fmt: skip
    assert validate_group_configs(broker, {"share.auto.offset.reset": "earliest"}) == {
        "share.auto.offset.reset": "earliest"
    }
    assert validate_group_configs(broker, {"share.heartbeat.interval.ms": "2000"})
    with pytest.raises(ConfigError, match=r"group\.share\.min\.heartbeat\.interval\.ms"):
        validate_group_configs(broker, {"share.heartbeat.interval.ms": "999"})
    with pytest.raises(ConfigError, match=r"group\.share\.max\.heartbeat\.interval\.ms"):
        validate_group_configs(
            BrokerConfig({"group.share.max.heartbeat.interval.ms": "10000"}),
            {"share.heartbeat.interval.ms": "12000"},
        )
