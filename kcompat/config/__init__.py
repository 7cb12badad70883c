"""Broker and topic configuration with Apache Kafka's property names, types and defaults.

    cfg = load_config("server.properties", overrides=["num.partitions=3"])
    cfg.num_partitions, cfg.get("log.retention.ms"), cfg.listeners
    topic = topic_config(cfg, {"retention.ms": "1000"})
    topic.log_config()       the typed LogConfig kcompat.log runs the topic's partitions with

See load.py for the precedence of sources, broker_properties.py and topic_properties.py for the
tables.
"""

from kcompat.config.broker_config import BrokerConfig, new_cluster_id
from kcompat.config.broker_properties import BROKER_CONFIGS
from kcompat.config.definition import (
    ConfigDef,
    ConfigEntry,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
    Importance,
    format_value,
)
from kcompat.config.environment import env_key_to_property, properties_from_env
from kcompat.config.errors import ConfigError
from kcompat.config.listeners import Listener
from kcompat.config.load import load_config, parse_override
from kcompat.config.log_config import LogConfig
from kcompat.config.properties_file import parse_properties, read_properties_file
from kcompat.config.topic_config import (
    AlterOp,
    TopicConfig,
    apply_incremental,
    topic_config,
    validate_topic_configs,
)
from kcompat.config.topic_properties import TOPIC_CONFIGS, TOPIC_SYNONYMS

__all__ = [
    "BROKER_CONFIGS",
    "TOPIC_CONFIGS",
    "TOPIC_SYNONYMS",
    "AlterOp",
    "BrokerConfig",
    "ConfigDef",
    "ConfigEntry",
    "ConfigError",
    "ConfigSource",
    "ConfigSynonym",
    "ConfigType",
    "Importance",
    "Listener",
    "LogConfig",
    "TopicConfig",
    "apply_incremental",
    "env_key_to_property",
    "format_value",
    "load_config",
    "new_cluster_id",
    "parse_override",
    "parse_properties",
    "properties_from_env",
    "read_properties_file",
    "topic_config",
    "validate_topic_configs",
]
