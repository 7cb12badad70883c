"""Broker and topic configuration: properties syntax, KAFKA_* mapping, precedence, validation,
effective topic configs and what DescribeConfigs will report."""

from __future__ import annotations

import dataclasses
import logging
import re
from pathlib import Path

import pytest

from kcompat.config import (
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    TOPIC_SYNONYMS,
    AlterOp,
    BrokerConfig,
    ConfigError,
    ConfigSource,
    ConfigType,
    Listener,
    LogConfig,
    apply_incremental,
    env_key_to_property,
    load_config,
    new_cluster_id,
    parse_properties,
    properties_from_env,
    read_properties_file,
    topic_config,
    validate_topic_configs,
)
from kcompat.config.broker_kafka_properties import INTERNAL
from kcompat.config.broker_properties import is_cluster_id
from kcompat.config.connection_limits import ip_overrides
from kcompat.config.definition import format_value, java_double, parse_typed
from kcompat.config.log_config import LOG_CONFIG_PROPERTIES


def load(*overrides: str, environ: dict[str, str] | None = None, path: Path | None = None) -> BrokerConfig:
    return load_config(path, list(overrides), environ or {}, warn=True)


# --- .properties syntax ---------------------------------------------------------------------


def test_separators_and_whitespace() -> None:
    text = "a=1\nb: 2\nc 3\n  d   =   4  \ne\t:\t5\nf==6\ng\n"
    assert parse_properties(text) == {"a": "1", "b": "2", "c": "3", "d": "4  ", "e": "5", "f": "=6", "g": ""}


def test_comments_and_blank_lines() -> None:
    text = "# comment\n! also a comment\n   # indented comment\n\n   \nkey=value # not a comment\n"
    assert parse_properties(text) == {"key": "value # not a comment"}


def test_comment_line_ending_in_backslash_does_not_continue() -> None:
    assert parse_properties("# note \\\nkey=value\n") == {"key": "value"}


def test_line_continuations() -> None:
    text = "listeners=PLAINTEXT://a:1,\\\n          PLAINTEXT2://b:2\nnext=1\n"
    assert parse_properties(text) == {"listeners": "PLAINTEXT://a:1,PLAINTEXT2://b:2", "next": "1"}


def test_even_backslashes_do_not_continue() -> None:
    assert parse_properties("path=C:\\\\\nother=x\n") == {"path": "C:\\", "other": "x"}


def test_continuation_at_end_of_file() -> None:
    assert parse_properties("key=value\\") == {"key": "value"}


def test_escapes() -> None:
    text = "tab=a\\tb\nnl=a\\nb\nuni=\\u00e9t\\u00E9\nplain=\\q\\\\\nkey\\=with\\:seps\\ x=1\n"
    assert parse_properties(text) == {
        "tab": "a\tb",
        "nl": "a\nb",
        "uni": "été",
        "plain": "q\\",
        "key=with:seps x": "1",
    }


def test_crlf_and_cr_line_endings() -> None:
    assert parse_properties("a=1\r\nb=2\rc=3") == {"a": "1", "b": "2", "c": "3"}


def test_later_keys_win() -> None:
    assert parse_properties("a=1\na=2\n") == {"a": "2"}


def test_malformed_unicode_escape_names_the_line() -> None:
    with pytest.raises(ConfigError, match=r"server.properties:3: malformed \\uXXXX escape"):
        parse_properties("a=1\nb=2\nc=\\u12x4\n", source="server.properties")


def test_file_reading(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_bytes("name=caf\xe9\n".encode("iso-8859-1"))  # Java's default encoding for .properties
    assert read_properties_file(path) == {"name": "café"}
    path.write_text("name=café\n", encoding="utf-8")
    assert read_properties_file(path) == {"name": "café"}
    with pytest.raises(ConfigError, match=r"cannot read properties file .*missing.properties"):
        read_properties_file(tmp_path / "missing.properties")


# --- KAFKA_* environment variables ----------------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "prop"),
    [
        ("NUM_PARTITIONS", "num.partitions"),
        ("LOG_RETENTION_MS", "log.retention.ms"),
        ("ADVERTISED_LISTENERS", "advertised.listeners"),
        ("FOO__BAR", "foo_bar"),
        ("FOO___BAR", "foo-bar"),
        ("LISTENER_NAME_INTERNAL_SSL_KEY___PASSWORD", "listener.name.internal.ssl.key-password"),
        # single underscores are matched left to right without overlap, as the image's converter does
        ("A_B_C", "a.b_c"),
    ],
)
def test_env_key_mapping(variable: str, prop: str) -> None:
    assert env_key_to_property(variable) == prop


def test_env_selection() -> None:
    environ = {
        "KAFKA_NUM_PARTITIONS": "3",
        "KAFKA_HEAP_OPTS": "-Xmx1G",
        "KAFKA_OPTS": "-Dx=y",
        "KAFKA_LOG4J_ROOT_LOGLEVEL": "WARN",
        "KAFKA_JMX_OPTS": "x",
        "KAFKA_": "nothing",
        "KAFKAESQUE": "no",
        "PATH": "/bin",
        "CLUSTER_ID": "MkU3OEVBNTcwNTJENDM2Qg",
    }
    assert properties_from_env(environ) == {"num.partitions": "3", "cluster.id": "MkU3OEVBNTcwNTJENDM2Qg"}


def test_kafka_cluster_id_variable_beats_image_cluster_id() -> None:
    environ = {"CLUSTER_ID": "MkU3OEVBNTcwNTJENDM2Qg", "KAFKA_CLUSTER_ID": "AAAAAAAAAAAAAAAAAAAAAA"}
    assert properties_from_env(environ)["cluster.id"] == "AAAAAAAAAAAAAAAAAAAAAA"


# --- precedence and sources -----------------------------------------------------------------


def test_defaults() -> None:
    cfg = load()
    assert cfg.listeners == [Listener("PLAINTEXT", "127.0.0.1", 9092)]
    assert cfg.advertised_listeners == [Listener("PLAINTEXT", "127.0.0.1", 9092)]
    assert cfg.node_id == 1
    assert cfg.log_dirs == ["./kcompat-data"] and cfg.data_dir == "./kcompat-data"
    assert cfg.num_partitions == 1
    assert cfg.auto_create_topics_enable is True
    assert cfg.message_max_bytes == 1048588
    assert cfg.socket_request_max_bytes == 104857600
    assert cfg.connections_max_idle_ms == 600000
    assert cfg.group_initial_rebalance_delay_ms == 3000
    assert cfg.offsets_retention_minutes == 10080
    assert cfg.offsets_topic_num_partitions == 50
    assert cfg.fetch_max_bytes == 57671680
    assert cfg.compression_type == "producer"
    assert cfg.log_cleanup_policy == ["delete"]
    assert cfg.get("log.retention.ms") == 168 * 3600 * 1000
    assert cfg.cluster_id is None
    assert cfg.source("num.partitions") is ConfigSource.DEFAULT_CONFIG


def test_precedence_file_env_override(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(
        "num.partitions=2\nlog.retention.hours=10\nmessage.max.bytes=2000\ndefault.replication.factor=1\n"
    )
    environ = {"KAFKA_NUM_PARTITIONS": "3", "KAFKA_MESSAGE_MAX_BYTES": "3000"}
    cfg = load("num.partitions=4", path=path, environ=environ)
    assert cfg.num_partitions == 4  # --override beats env and file
    assert cfg.message_max_bytes == 3000  # env beats file
    assert cfg.get("log.retention.ms") == 10 * 3600 * 1000  # file beats default
    assert cfg.source("num.partitions") is ConfigSource.STATIC_BROKER_CONFIG
    assert cfg.origins["num.partitions"] == "--override"
    assert cfg.origins["message.max.bytes"] == "environment variable KAFKA_MESSAGE_MAX_BYTES"
    assert cfg.origins["log.retention.hours"] == str(path)


def test_override_value_may_contain_equals() -> None:
    cfg = load("listeners=PLAINTEXT://127.0.0.1:9095", "broker.rack=a=b")
    assert cfg.broker_rack == "a=b"
    with pytest.raises(ConfigError, match=r"--override 'num.partitions' is invalid: expected key=value"):
        load("num.partitions")


def test_unknown_keys_warn_once_each(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kcompat.config")
    cfg = load("no.such.thing=1", "retention.ms=5", "num.network.threads=4", "zookeeper.connect=x")
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert "no.such.thing" in warnings[0].getMessage()
    assert "log.retention.ms" in warnings[1].getMessage()  # a topic config named at broker level gets a hint
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert any("num.network.threads" in m for m in infos) and any("zookeeper.connect" in m for m in infos)
    assert cfg.unknown == {"no.such.thing": "1", "retention.ms": "5"}
    assert cfg.num_network_threads == 4


# --- invalid values -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("num.partitions=abc", r"num.partitions='abc' is invalid: expected a 32-bit integer"),
        ("num.partitions=0", r"num.partitions='0' is invalid: expected a value of at least 1"),
        (
            "num.partitions=2147483648",
            r"num.partitions='2147483648' is invalid: expected a 32-bit integer in",
        ),
        ("num.partitions=1_000", r"num.partitions='1_000' is invalid"),
        (
            "auto.create.topics.enable=yes",
            r"auto.create.topics.enable='yes' is invalid: expected true or false",
        ),
        (
            "compression.type=brotli",
            r"compression.type='brotli' is invalid: expected one of uncompressed, zstd",
        ),
        ("log.cleanup.policy=delete,shred", r"log.cleanup.policy='delete,shred' is invalid"),
        ("log.cleaner.min.cleanable.ratio=1.5", r"expected a value between 0 and 1"),
        (
            "log.segment.bytes=100",
            r"log.segment.bytes='100' is invalid: expected a value of at least 1048576",
        ),
        ("log.message.timestamp.type=Now", r"expected one of CreateTime, LogAppendTime"),
        (
            "replica.selector.class=com.example.Nearest",
            r"replica.selector.class='com.example.Nearest' is invalid",
        ),
        ("cluster.id=not-an-id", r"cluster.id='not-an-id' is invalid: expected 22 characters"),
        (
            "listeners=localhost:9092",
            r"listeners entry 'localhost:9092' is invalid: expected NAME://host:port",
        ),
        ("listeners=PLAINTEXT://:99999", r"port must be in \[0, 65535\]"),
        (
            "listeners=SSL://:9093",
            r"listener SSL uses TLS and needs a certificate: set ssl.keystore.location",
        ),
        (
            "listeners=SASL_PLAINTEXT://:9093",
            r"listener SASL_PLAINTEXT uses SASL: set sasl.enabled.mechanisms",
        ),
        ("listeners=PLAINTEXT://:1,PLAINTEXT://:2", r"names listener PLAINTEXT more than once"),
        ("listeners=PLAINTEXT://0.0.0.0:9092", r"cannot be advertised to clients"),
        ("advertised.listeners=OTHER://h:1", r"advertised.listeners entry OTHER://h:1 names no listener"),
        ("log.dirs=", r"log.dirs is empty"),
        ("group.min.session.timeout.ms=9999999", r"is larger than group.max.session.timeout.ms"),
    ],
)
def test_invalid_values(override: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected) as info:
        load(override)
    message = str(info.value)
    assert "\n" not in message
    assert message.endswith("(set by --override)")


def test_error_names_environment_variable() -> None:
    with pytest.raises(ConfigError, match=r"set by environment variable KAFKA_NUM_PARTITIONS\)$") as info:
        load(environ={"KAFKA_NUM_PARTITIONS": "many"})
    assert info.value.key == "num.partitions" and info.value.value == "many"


def test_error_names_file(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("message.max.bytes = lots\n")
    with pytest.raises(
        ConfigError, match=rf"message.max.bytes='lots' is invalid: .*\(set by {re.escape(str(path))}\)$"
    ):
        load(path=path)


def test_broker_id_and_node_id() -> None:
    assert load("broker.id=7").node_id == 7
    assert load("broker.id=7", "node.id=7").node_id == 7
    with pytest.raises(ConfigError, match=r"broker.id=7 and node.id=8 must be equal"):
        load("broker.id=7", "node.id=8")


def test_values_are_trimmed_and_booleans_case_insensitive() -> None:
    cfg = load(
        "num.partitions=  5  ", "auto.create.topics.enable=FALSE", "log.cleanup.policy= compact , delete "
    )
    assert cfg.num_partitions == 5
    assert cfg.auto_create_topics_enable is False
    assert cfg.log_cleanup_policy == ["compact", "delete"]


# --- listeners ------------------------------------------------------------------------------


def test_listeners_forms() -> None:
    cfg = load(
        "listeners=PLAINTEXT://:9092,INTERNAL://[::1]:9093,CONTROLLER://:9094",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.listener.names=CONTROLLER",
        "advertised.listeners=PLAINTEXT://kafka.example:9092,INTERNAL://[::1]:9093",
    )
    assert cfg.listeners == [Listener("PLAINTEXT", "", 9092), Listener("INTERNAL", "::1", 9093)]
    assert cfg.advertised_listeners == [
        Listener("PLAINTEXT", "kafka.example", 9092),
        Listener("INTERNAL", "::1", 9093),
    ]
    assert str(cfg.listeners[1]) == "INTERNAL://[::1]:9093"


def test_unknown_key_names_the_closest_known_property(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="kcompat.config")
    load("num.partiton=3", "auto.create.topic.enable=false", "log.retention.hour=2", "no.such.thing=1")
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert messages == [
        "unknown property num.partiton='3' ignored (did you mean num.partitions?)",
        "unknown property auto.create.topic.enable='false' ignored (did you mean auto.create.topics.enable?)",
        "unknown property log.retention.hour='2' ignored (did you mean log.retention.hours?)",
        "unknown property no.such.thing='1' ignored",  # nothing close: no guess
    ]


def test_combined_mode_advertised_controller_listener_is_accepted_and_not_advertised() -> None:
    # Kafka 4.x's config/server.properties advertises its CONTROLLER listener as well.
    cfg = load(
        "process.roles=broker,controller",
        "listeners=PLAINTEXT://:9092,CONTROLLER://:9093",
        "advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093",
        "controller.listener.names=CONTROLLER",
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL",
    )
    assert cfg.listeners == [Listener("PLAINTEXT", "", 9092)]
    assert cfg.advertised_listeners == [Listener("PLAINTEXT", "localhost", 9092)]
    # a name in neither listeners nor controller.listener.names is still refused
    with pytest.raises(
        ConfigError, match=r"advertised.listeners entry OTHER://h:1 names no listener in listeners"
    ):
        load(
            "listeners=PLAINTEXT://:9092,CONTROLLER://:9093",
            "controller.listener.names=CONTROLLER",
            "advertised.listeners=PLAINTEXT://localhost:9092,OTHER://h:1",
        )


def test_empty_advertised_host_is_this_machine() -> None:
    import socket

    cfg = load("listeners=PLAINTEXT://:9092")
    assert cfg.advertised_listeners == [Listener("PLAINTEXT", socket.gethostname(), 9092)]


def test_unmapped_listener_name() -> None:
    with pytest.raises(ConfigError, match=r"has no security protocol"):
        load("listeners=CLIENT://:9092")


# --- typed access ---------------------------------------------------------------------------


def test_retention_chain() -> None:
    assert load("log.retention.minutes=5").get("log.retention.ms") == 5 * 60_000
    assert load("log.retention.minutes=5", "log.retention.hours=1").log_retention_ms == 5 * 60_000
    assert load("log.retention.ms=1234", "log.retention.minutes=5").get("log.retention.ms") == 1234
    assert load("log.retention.ms=-1").get("log.retention.ms") == -1
    assert load("log.retention.hours=-1").get("log.retention.ms") == -1
    assert load("log.retention.minutes=5").raw("log.retention.ms") is None
    assert load("log.roll.hours=2").log_roll_ms == 2 * 3_600_000


def test_log_dirs_and_log_dir() -> None:
    assert load("log.dir=/data/one").log_dirs == ["/data/one"]
    cfg = load("log.dir=/data/one", "log.dirs=/data/a,/data/b")
    assert cfg.log_dirs == ["/data/a", "/data/b"] and cfg.get("log.dirs") == ["/data/a", "/data/b"]
    assert cfg.data_dir == "/data/a"


def test_generic_get_and_attributes() -> None:
    cfg = load("message.max.bytes=5000")
    assert cfg.get("message.max.bytes") == cfg.message_max_bytes == 5000
    with pytest.raises(KeyError):
        cfg.get("no.such.property")
    with pytest.raises(AttributeError):
        _ = cfg.no_such_property


def test_cluster_ids() -> None:
    generated = {new_cluster_id() for _ in range(20)}
    assert len(generated) == 20 and all(is_cluster_id(c) for c in generated)
    assert load(f"cluster.id={next(iter(generated))}").cluster_id in generated


# --- the tables -----------------------------------------------------------------------------


def test_every_default_passes_its_own_validator() -> None:
    for table in (BROKER_CONFIGS, TOPIC_CONFIGS):
        for definition in table.values():
            text = definition.default_text
            if text is not None:
                assert definition.parse(text) == definition.default, definition.name
            assert definition.doc and "\n" not in definition.doc, definition.name


def test_synonyms_name_existing_broker_properties() -> None:
    assert set(TOPIC_SYNONYMS) <= set(TOPIC_CONFIGS)
    for name, synonyms in TOPIC_SYNONYMS.items():
        for synonym in synonyms:
            assert synonym.broker_name in BROKER_CONFIGS, (name, synonym)


def test_topic_defaults_agree_with_broker_defaults() -> None:
    topic = topic_config(BrokerConfig())
    for name, definition in TOPIC_CONFIGS.items():
        assert topic.get(name) == definition.default, name
        assert topic.source(name) is ConfigSource.DEFAULT_CONFIG


def test_java_number_forms() -> None:
    assert java_double(0.5) == "0.5"
    assert java_double(100.0) == "100.0"
    assert java_double(1e7) == "1.0E7"
    assert java_double(1.7976931348623157e308) == "1.7976931348623157E308"
    assert parse_typed("x", ConfigType.DOUBLE, "1.5E3") == 1500.0
    assert parse_typed("x", ConfigType.LIST, " ") == []
    assert format_value(ConfigType.BOOLEAN, False) == "false"


# --- topic configs --------------------------------------------------------------------------


def test_topic_inherits_broker_synonyms() -> None:
    cfg = load(
        "log.retention.hours=2", "log.roll.ms=5000", "message.max.bytes=4096", "log.cleanup.policy=compact"
    )
    topic = topic_config(cfg)
    assert topic.retention_ms == 2 * 3_600_000
    assert topic.segment_ms == 5000
    assert topic.max_message_bytes == 4096
    assert topic.cleanup_policy == ["compact"]
    assert topic.source("retention.ms") is ConfigSource.STATIC_BROKER_CONFIG
    assert topic.source("segment.bytes") is ConfigSource.DEFAULT_CONFIG


def test_topic_override_wins_and_describes_synonyms() -> None:
    cfg = load("log.retention.minutes=30")
    topic = topic_config(cfg, {"retention.ms": "1000", "cleanup.policy": "compact,delete"})
    assert topic.get("retention.ms") == 1000 and topic.source("retention.ms") is ConfigSource.TOPIC_CONFIG
    (entry,) = topic.describe(["retention.ms"])
    assert entry.value == "1000" and entry.source is ConfigSource.TOPIC_CONFIG
    assert entry.type is ConfigType.LONG and not entry.read_only and entry.documentation
    # As Kafka lists them: the broker synonyms of log.retention.ms only, which is not set, so none
    # (the inherited value still comes from log.retention.minutes).
    assert [(s.name, s.value, s.source) for s in entry.synonyms] == [
        ("retention.ms", "1000", ConfigSource.TOPIC_CONFIG)
    ]
    (inherited,) = topic_config(cfg).describe(["retention.ms"])
    assert (
        inherited.value == "1800000"
        and inherited.source is ConfigSource.DEFAULT_CONFIG
        and not inherited.synonyms
    )
    with_ms = topic_config(load("log.retention.ms=5000", "log.retention.hours=2"))
    (entry,) = with_ms.describe(["retention.ms"])
    assert entry.value == "5000" and entry.source is ConfigSource.STATIC_BROKER_CONFIG
    assert [(s.name, s.value, s.source) for s in entry.synonyms] == [
        ("log.retention.ms", "5000", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "2", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    ]
    (entry,) = with_ms.describe(["retention.ms"], include_synonyms=False)
    assert entry.source is ConfigSource.STATIC_BROKER_CONFIG and not entry.synonyms
    (default_entry,) = topic_config(BrokerConfig()).describe(["retention.ms"])
    assert default_entry.value == "604800000" and default_entry.source is ConfigSource.DEFAULT_CONFIG
    assert default_entry.synonyms == ()
    assert topic.describe(["no.such.config"]) == []
    assert len(topic.describe()) == len(TOPIC_CONFIGS)


def test_topic_validation() -> None:
    assert validate_topic_configs({"retention.ms": " 100 "}) == {"retention.ms": "100"}
    with pytest.raises(ConfigError, match=r"Unknown topic config name: retention.hours"):
        validate_topic_configs({"retention.hours": "1"})
    with pytest.raises(ConfigError, match=r"Null value not supported for topic configs: retention.ms"):
        validate_topic_configs({"retention.ms": None})
    with pytest.raises(
        ConfigError, match=r"segment.bytes='10' is invalid: expected a value of at least 1048576"
    ):
        topic_config(BrokerConfig(), {"segment.bytes": "10"})
    with pytest.raises(ConfigError, match=r"retention.ms='-2' is invalid"):
        validate_topic_configs({"retention.ms": "-2"})


def test_incremental_alter() -> None:
    current = {"retention.ms": "1000"}
    result = apply_incremental(
        current,
        [
            ("cleanup.policy", AlterOp.APPEND, "compact"),
            ("retention.ms", AlterOp.DELETE, None),
            ("max.message.bytes", AlterOp.SET, "2048"),
        ],
    )
    assert result == {"cleanup.policy": "delete,compact", "max.message.bytes": "2048"}
    assert (
        apply_incremental(result, [("cleanup.policy", AlterOp.SUBTRACT, "delete")])["cleanup.policy"]
        == "compact"
    )
    with pytest.raises(ConfigError, match=r"Config value append is not allowed for config key: retention.ms"):
        apply_incremental({}, [("retention.ms", AlterOp.APPEND, "5")])
    with pytest.raises(ConfigError, match=r"Unknown topic config name: nope"):
        apply_incremental({}, [("nope", AlterOp.SET, "1")])
    with pytest.raises(ConfigError, match=r"max.message.bytes='-5' is invalid"):
        apply_incremental({}, [("max.message.bytes", AlterOp.SET, "-5")])


def test_topic_properties_feed_the_log_config() -> None:
    topic = topic_config(
        load("log.segment.bytes=2097152", "producer.id.expiration.ms=60000", "log.retention.hours=2"),
        {"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": "0.1"},
    )
    log_config = topic.log_config()
    assert log_config.segment_bytes == 2097152  # the broker synonym
    assert log_config.retention_ms == 2 * 3_600_000  # a unit chain, resolved
    assert log_config.cleanup_policy == ("compact", "delete") and log_config.compact and log_config.delete
    assert log_config.min_cleanable_dirty_ratio == 0.1
    assert log_config.max_message_bytes == 1048588
    assert log_config.producer_id_expiration_ms == 60000  # a broker property, not a topic config


def test_log_config_defaults_are_the_config_definitions() -> None:
    # LogConfig() (what kcompat.log's own tests and tools build) is what a topic gets from a broker
    # with nothing set: the defaults live in one place, the definitions.
    assert LogConfig() == topic_config(BrokerConfig()).log_config()
    for name in LOG_CONFIG_PROPERTIES:
        assert name in TOPIC_CONFIGS or name in BROKER_CONFIGS, name


def test_log_config_cannot_hold_an_unknown_key() -> None:
    with pytest.raises(TypeError, match="retention_hours"):
        LogConfig(retention_hours=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        dataclasses.replace(LogConfig(), unknown_key="x")  # type: ignore[call-arg]
    # nothing in kcompat.log parses Kafka-style strings any more
    assert not hasattr(LogConfig, "from_properties") and not hasattr(LogConfig, "with_properties")


# --- dynamic broker configs -----------------------------------------------------------------


def test_dynamic_layers() -> None:
    cfg = load("message.max.bytes=2000")
    changed = cfg.with_dynamic({"message.max.bytes": "3000"})
    assert cfg.message_max_bytes == 2000 and changed.message_max_bytes == 3000
    assert changed.source("message.max.bytes") is ConfigSource.DYNAMIC_BROKER_CONFIG
    assert topic_config(changed).max_message_bytes == 3000
    (entry,) = changed.describe(["message.max.bytes"])
    assert [(s.value, s.source) for s in entry.synonyms] == [
        ("3000", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("2000", ConfigSource.STATIC_BROKER_CONFIG),
        ("1048588", ConfigSource.DEFAULT_CONFIG),
    ]
    assert not entry.read_only
    reverted = changed.with_dynamic({"message.max.bytes": None})
    assert reverted.message_max_bytes == 2000
    cluster = cfg.with_dynamic({"log.retention.ms": "60000"}, cluster_default=True)
    assert cluster.source("log.retention.ms") is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert cluster.dynamic_default_values == {"log.retention.ms": "60000"}
    with pytest.raises(ConfigError, match=r"node.id cannot be changed at run time"):
        cfg.with_dynamic({"node.id": "3"})
    with pytest.raises(ConfigError, match=r"message.max.bytes='x' is invalid"):
        cfg.with_dynamic({"message.max.bytes": "x"})


def test_broker_describe() -> None:
    entries = {e.name: e for e in load("num.partitions=3").describe()}
    assert set(entries) == set(BROKER_CONFIGS) - INTERNAL  # Kafka describes no internal property
    assert entries["num.partitions"].value == "3"
    assert entries["num.partitions"].source is ConfigSource.STATIC_BROKER_CONFIG
    assert entries["num.partitions"].read_only
    assert entries["log.retention.ms"].value is None
    # Kafka's synonym lists start at the property itself: an unset log.retention.ms lists none.
    assert entries["log.retention.ms"].synonyms == ()
    assert [(s.name, s.source) for s in entries["log.retention.hours"].synonyms] == [
        ("log.retention.hours", ConfigSource.DEFAULT_CONFIG)
    ]
    entries = {e.name: e for e in load("log.retention.ms=1000", "log.retention.minutes=5").describe()}
    assert [(s.name, s.value, s.source) for s in entries["log.retention.ms"].synonyms] == [
        ("log.retention.ms", "1000", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.minutes", "5", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    ]
    assert [s.name for s in entries["log.retention.minutes"].synonyms] == [
        "log.retention.minutes",
        "log.retention.hours",
    ]
    assert entries["log.retention.hours"].source is ConfigSource.DEFAULT_CONFIG
    # log.flush.scheduler.interval.ms is only log.flush.interval.ms's fallback, not a unit of it.
    assert entries["log.flush.scheduler.interval.ms"].synonyms[0].name == "log.flush.scheduler.interval.ms"
    assert entries["log.flush.interval.ms"].synonyms == ()
    # Read-only as Kafka's DynamicBrokerConfig decides: listeners are dynamic there, advertised ones not.
    assert not entries["listeners"].read_only and entries["advertised.listeners"].read_only
    assert not entries["log.retention.ms"].read_only and entries["log.retention.hours"].read_only


def test_describe_sources_and_kafka_synonym_rules() -> None:
    """Every way of setting a property is STATIC_BROKER_CONFIG, as in Kafka; node.id and broker.id
    fill each other in; listeners are dynamic in Kafka but kcompat needs a restart for them."""
    cfg = load("message.max.bytes=2000000", environ={"KAFKA_NUM_PARTITIONS": "3"})
    entries = {
        e.name: e for e in cfg.describe(["num.partitions", "message.max.bytes", "broker.id", "node.id"])
    }
    for name in ("num.partitions", "message.max.bytes"):
        assert entries[name].source is ConfigSource.STATIC_BROKER_CONFIG
        assert entries[name].synonyms[0].source is ConfigSource.STATIC_BROKER_CONFIG
    assert entries["broker.id"].source is ConfigSource.DEFAULT_CONFIG and entries["broker.id"].value == "-1"
    entries = {e.name: e for e in load("node.id=4").describe(["broker.id", "node.id"])}
    assert [(e.value, e.source) for e in entries.values()] == [("4", ConfigSource.STATIC_BROKER_CONFIG)] * 2
    assert load("broker.id=6").node_id == 6
    with pytest.raises(ConfigError, match="listeners cannot be changed at run time"):
        load().with_dynamic({"listeners": "PLAINTEXT://127.0.0.1:1"})


def test_cluster_default_resource_describes_its_own_layer() -> None:
    """The "" resource lists the cluster-wide dynamic values only, each with only that layer as its
    synonym, even where this broker's own dynamic value wins (Kafka 4.3's answer)."""
    cfg = load("log.retention.hours=2").with_dynamic({"log.retention.ms": "9000"}, cluster_default=True)
    cfg = cfg.with_dynamic({"log.retention.ms": "7000"})
    (entry,) = cfg.describe(cluster_default=True)
    assert (entry.name, entry.value, entry.source) == (
        "log.retention.ms",
        "9000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    assert [(s.name, s.value) for s in entry.synonyms] == [("log.retention.ms", "9000")]
    (mine,) = cfg.describe(["log.retention.ms"])
    assert (mine.value, mine.source) == ("7000", ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert [s.source for s in mine.synonyms] == [ConfigSource.DYNAMIC_BROKER_CONFIG, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                                                 ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.DEFAULT_CONFIG]  # fmt: skip
    assert cfg.describe(["num.partitions"], cluster_default=True) == []


def test_cluster_mode_broker_id_must_not_be_a_controller_id() -> None:
    with pytest.raises(ConfigError, match=r"node.id=3000 is a controller's id in controller.quorum.voters"):
        load("process.roles=broker", "node.id=3000", "controller.quorum.voters=3000@127.0.0.1:9093")
    config = load("process.roles=broker", "node.id=1", "controller.quorum.voters=3000@127.0.0.1:9093")
    assert (
        config.get("broker.heartbeat.interval.ms") == 2000 and config.get("broker.session.timeout.ms") == 9000
    )
    # The combined roles (single-node mode) keep today's behaviour whatever the voters say.
    load("node.id=3000", "controller.quorum.voters=3000@127.0.0.1:9093")


CLUSTER_USED = (
    "offsets.topic.replication.factor=3",
    "inter.broker.listener.name=PLAINTEXT",
    "transaction.state.log.replication.factor=3",
    "transaction.state.log.min.isr=2",
    "replica.lag.time.max.ms=5000",
)


def ignored_lines(caplog: pytest.LogCaptureFixture) -> dict[str, str]:
    out = {}
    for r in caplog.records:
        m = re.fullmatch(r"property (\S+) accepted and ignored: (.*)", r.getMessage())
        if m:
            out[m[1]] = m[2]
    return out


def test_a_single_node_says_it_has_nothing_to_replicate(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, "kcompat.config"):
        load(*CLUSTER_USED)
    said = ignored_lines(caplog)
    assert {k.split("=")[0] for k in CLUSTER_USED} <= set(said)
    assert all("single node" in said[k.split("=")[0]] for k in CLUSTER_USED)


def test_cluster_mode_does_not_call_what_it_uses_ignored(caplog: pytest.LogCaptureFixture) -> None:
    """Cluster mode replicates and elects: the properties it uses are not "accepted and ignored:
    kcompat is a single node"; those it does ignore say why, truly (issue 26)."""
    cluster = ("process.roles=broker", "node.id=4", "controller.quorum.bootstrap.servers=127.0.0.1:9093",
               "controller.listener.names=CONTROLLER")  # fmt: skip
    with caplog.at_level(logging.INFO, "kcompat.config"):
        load(*cluster, *CLUSTER_USED, "min.insync.replicas=2", "auto.leader.rebalance.enable=true", "num.replica.fetchers=2",
             "replica.socket.timeout.ms=30000", "metadata.log.dir=/tmp/m")  # fmt: skip
    said = ignored_lines(caplog)
    assert not {k.split("=")[0] for k in CLUSTER_USED} & set(said), said
    assert not [m for m in said.values() if "single node" in m or "no KRaft" in m], said
    assert "controller" in said["auto.leader.rebalance.enable"]
    assert set(said) == {"auto.leader.rebalance.enable", "num.replica.fetchers", "replica.socket.timeout.ms",
                         "metadata.log.dir"}  # fmt: skip


def test_quota_windows_are_used_not_ignored(caplog: pytest.LogCaptureFixture) -> None:
    """quota.window.num and quota.window.size.seconds size the client quotas' rate (issue 29):
    read, bounded as Kafka bounds them, and no longer "accepted and ignored"."""
    with caplog.at_level(logging.INFO, "kcompat.config"):
        cfg = load("quota.window.num=2", "quota.window.size.seconds=3")
    assert (cfg.get("quota.window.num"), cfg.get("quota.window.size.seconds")) == (2, 3)
    assert not ignored_lines(caplog)
    assert (load().get("quota.window.num"), load().get("quota.window.size.seconds")) == (11, 1)
    with pytest.raises(ConfigError):
        load("quota.window.num=0")


def test_unknown_ssl_and_sasl_keys_name_the_closest_known_one(caplog: pytest.LogCaptureFixture) -> None:
    """ssl.* and sasl.* keys go through the unknown-property check too, listener- and
    mechanism-prefixed forms included; the value is not shown (it may be a password)."""
    caplog.set_level(logging.WARNING, logger="kcompat.config")
    load(
        "ssl.keystore.locaton=/k.p12",
        "ssl.keystore.pasword=s3cret",
        "listener.name.sasl_ssl.ssl.truststore.locations=/t.p12",
        "listener.name.sasl_ssl.plain.sasl.jaas.confg=x",
        "sasl.enabled.mechanism=PLAIN",
        "ssl.totally.made.up=1",
        "ssl.keystore.location=/k.p12",  # known forms: no line
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=y",
        "sasl.oauthbearer.jwks.endpoint.url=https://idp/keys",
        "ssl.endpoint.identification.algorithm=",
    )
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert messages == [
        "unknown property ssl.keystore.locaton ignored (did you mean ssl.keystore.location?)",
        "unknown property ssl.keystore.pasword ignored (did you mean ssl.keystore.password?)",
        "unknown property listener.name.sasl_ssl.ssl.truststore.locations ignored"
        " (did you mean listener.name.sasl_ssl.ssl.truststore.location?)",
        "unknown property listener.name.sasl_ssl.plain.sasl.jaas.confg ignored"
        " (did you mean listener.name.sasl_ssl.plain.sasl.jaas.config?)",
        "unknown property sasl.enabled.mechanism ignored (did you mean sasl.enabled.mechanisms?)",
        "unknown property ssl.totally.made.up ignored",
    ]
    assert "s3cret" not in caplog.text


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"group.consumer.heartbeat.interval.ms": "1000"},
         "group.consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms"),
        ({"group.consumer.session.timeout.ms": "70000"},
         "group.consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"),
        ({"group.consumer.max.session.timeout.ms": "1"},
         "group.consumer.max.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"),
        ({"group.consumer.min.session.timeout.ms": "1000", "group.consumer.session.timeout.ms": "5000"},
         "group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms"),
    ],
)  # fmt: skip
def test_consumer_group_bounds_as_kafka_enforces_them(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BrokerConfig(props)


def test_lowered_consumer_group_bounds_let_short_intervals_start() -> None:
    cfg = BrokerConfig({"group.consumer.min.heartbeat.interval.ms": "100", "group.consumer.heartbeat.interval.ms": "300",
                        "group.consumer.min.session.timeout.ms": "1000", "group.consumer.session.timeout.ms": "10000"})  # fmt: skip
    assert cfg.get("group.consumer.heartbeat.interval.ms") == 300


def test_topic_config_values_are_resolved_once_per_config() -> None:
    """get() keeps what it resolved (Produce asks compression.type per request); a broker change
    makes a new BrokerConfig, so a TopicConfig built on it sees the new value."""
    broker = BrokerConfig({"log.dirs": "/tmp/x", "compression.type": "gzip"})
    tc = topic_config(broker, {"retention.ms": "1000"})
    assert tc.get("compression.type") == "gzip" == tc.get("compression.type")
    assert tc.get("retention.ms") == 1000
    changed = broker.with_dynamic({"compression.type": "lz4"})
    assert topic_config(changed, {}).get("compression.type") == "lz4"
    assert tc.get("compression.type") == "gzip"  # the old one is of the old broker config
    with pytest.raises(KeyError, match="unknown topic config"):
        tc.get("no.such.config")
    with pytest.raises(KeyError, match="unknown topic config"):
        tc.get("no.such.config")


def test_max_connections_per_ip_overrides_parse_as_kafka() -> None:
    """CoreUtils.parseCsvMap: host:count pairs, the count after the last colon (IPv6 hosts too)."""
    assert dict(ip_overrides("127.0.0.2:3, ::1:5,host-a:0")) == {"127.0.0.2": 3, "::1": 5, "host-a": 0}
    assert dict(ip_overrides("0:0:0:0:0:0:0:1:7")) == {"::1": 7}
    assert dict(ip_overrides("")) == {}
    for bad in ("127.0.0.2", "127.0.0.2:x", ":3", "127.0.0.2:-1"):
        with pytest.raises(ConfigError, match=r"max\.connections\.per\.ip\.overrides"):
            BrokerConfig({"max.connections.per.ip.overrides": bad})
    config = BrokerConfig(
        {"max.connections.per.ip.overrides": "127.0.0.2:3", "max.connection.creation.rate": "5"}
    )
    assert config.max_connection_creation_rate == 5
