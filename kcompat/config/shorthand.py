"""The shorthand the property tables (broker_properties, broker_log_properties,
broker_group_properties, topic_properties) are written in: type and importance names, the value sets
broker and topic properties share, why an accepted property has no effect, and `prop`, a ConfigDef
with positional arguments."""

from __future__ import annotations

from kcompat.config.definition import Check, ConfigDef, ConfigType, Importance, Validator

BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, PASSWORD = (
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.SHORT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.LIST,
    ConfigType.PASSWORD,
)
HIGH, MEDIUM, LOW = Importance.HIGH, Importance.MEDIUM, Importance.LOW

COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
CLEANUP_POLICIES = ("compact", "delete")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
GZIP_LEVEL = Check(lambda v: v == -1 or 1 <= v <= 9, "-1 or a level in [1, 9]")

ONE_NODE = "kcompat is a single node; there is nothing to replicate or elect."
ONE_LOOP = "kcompat serves all connections from one event loop."
NO_QUORUM = "kcompat has no KRaft controller quorum."
NO_JMX = "kcompat has no JMX; its metrics are Prometheus's, on admin.listener."
NO_TIERED_STORAGE = "kcompat has no tiered storage."


def prop(
    name: str,
    type_: ConfigType,
    default: object,
    doc: str,
    importance: Importance = MEDIUM,
    validator: Validator | None = None,
    dynamic: bool = False,
    ignored: str | None = None,
) -> ConfigDef:
    """One property, its arguments in the order the tables read best."""
    return ConfigDef(
        name=name,
        type=type_,
        default=default,
        doc=doc,
        importance=importance,
        validator=validator,
        dynamic=dynamic,
        ignored=ignored,
    )
