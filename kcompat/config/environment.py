"""KAFKA_* environment variables as properties, the way the apache/kafka container image maps them.

    KAFKA_ prefix removed, then:   _    ->  .        KAFKA_LOG_RETENTION_MS      log.retention.ms
                                   __   ->  _        KAFKA_FOO__BAR              foo_bar
                                   ___  ->  -        KAFKA_FOO___BAR             foo-bar
    and the whole name lower-cased.

A single underscore counts only between two other characters, matched left to right without
overlap, exactly as the image's converter does. Variables the image reserves for the JVM and its
scripts (heap, log4j, JMX ...) are not properties and are skipped, as is CLUSTER_ID, which the image
uses to format storage and which we take as `cluster.id`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

PREFIX = "KAFKA_"

# The image's exclusion list, plus launcher variables of Kafka's own scripts.
EXCLUDED = frozenset(
    {
        "KAFKA_VERSION",
        "KAFKA_HEAP_OPT",
        "KAFKA_HEAP_OPTS",
        "KAFKA_LOG4J_OPTS",
        "KAFKA_OPTS",
        "KAFKA_JMX_OPTS",
        "KAFKA_JVM_PERFORMANCE_OPTS",
        "KAFKA_GC_LOG_OPTS",
        "KAFKA_LOG4J_ROOT_LOGLEVEL",
        "KAFKA_LOG4J_LOGGERS",
        "KAFKA_TOOLS_LOG4J_LOGLEVEL",
        "KAFKA_JMX_PORT",
        "KAFKA_JMX_HOSTNAME",
        "KAFKA_DEBUG",
        "KAFKA_HOME",
    }
)

_SINGLE = re.compile(r"[^_]_[^_]")


def env_key_to_property(name: str) -> str:
    """The property name for an environment variable name without its KAFKA_ prefix."""
    dotted = _SINGLE.sub(lambda m: m.group(0).replace("_", "."), name)
    return dotted.replace("___", "-").replace("__", "_").lower()


def properties_from_env(environ: Mapping[str, str]) -> dict[str, str]:
    """Properties named by KAFKA_* variables (and CLUSTER_ID) of `environ`."""
    props: dict[str, str] = {}
    for name in sorted(environ):
        if name.startswith(PREFIX) and name not in EXCLUDED and len(name) > len(PREFIX):
            props[env_key_to_property(name[len(PREFIX) :])] = environ[name]
    cluster_id = environ.get("CLUSTER_ID")
    if cluster_id and "cluster.id" not in props:
        props["cluster.id"] = cluster_id
    return props
