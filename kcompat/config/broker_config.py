"""BrokerConfig: the typed, validated broker configuration the rest of kcompat reads.

    cfg.message_max_bytes          typed attribute for any property in BROKER_CONFIGS (dots -> _)
    cfg.get("log.retention.ms")    the effective value: unit chains resolved (log.retention.ms,
                                   else .minutes, else .hours), log.dirs falling back to log.dir
    cfg.raw("log.retention.ms")    the property's own value or default, None when it has neither
    cfg.listeners                  [Listener(name, host, port, protocol), ...] that kcompat serves
    cfg.advertised_listeners       what Metadata hands to clients
    cfg.controller_listeners       declared in listeners but named in controller.listener.names
    cfg.listener_security_protocol_map, cfg.controller_listener_names   typed, upper-case names
    cfg.source("num.partitions")   where the value came from (ConfigSource)

Values set in a file, the environment or --override are STATIC_BROKER_CONFIG; `with_dynamic()`
layers run-time changes (AlterConfigs on a broker resource) on top, as Kafka does.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterable, Mapping
from typing import Any

from kcompat.config.broker_kafka_properties import INTERNAL, group_bound_error
from kcompat.config.broker_properties import BROKER_CONFIGS, RESTART_ONLY
from kcompat.config.definition import (
    ConfigDef,
    ConfigEntry,
    ConfigSource,
    ConfigSynonym,
    TypedAttributes,
    format_value,
)
from kcompat.config.errors import ConfigError
from kcompat.config.ignored_properties import ignored_reason, in_mode, topic_hint
from kcompat.config.listener_security import ListenerSecurity, is_security_key, parse_security
from kcompat.config.listeners import Listener, parse_listeners, parse_protocol_map
from kcompat.config.security_keys import unknown_security_key
from kcompat.config.topic_properties import BROKER_SYNONYM_CHAINS
from kcompat.kafka_uuid import random_uuid_base64

log = logging.getLogger("kcompat.config")

_UNROUTABLE = ("0.0.0.0", "::")


def new_cluster_id() -> str:
    """A fresh cluster id in Kafka's form: a random UUID as 22 characters of URL-safe base64."""
    return random_uuid_base64()


class BrokerConfig(TypedAttributes):
    """Immutable: construct with `BrokerConfig(props)` or `load_config(...)`; derive with `with_dynamic`."""

    _definitions = BROKER_CONFIGS

    def __init__(
        self,
        props: Mapping[str, str] | None = None,
        *,
        origins: Mapping[str, str] | None = None,
        warn: bool = False,
    ) -> None:
        self._static: dict[str, Any] = {}
        self._dynamic: dict[str, Any] = {}
        self._dynamic_default: dict[str, Any] = {}
        self.unknown: dict[str, str] = {}
        self.ignored: dict[str, str] = {}
        self.origins: dict[str, str] = dict(origins or {})
        # ssl.*, sasl.*, listener.name.*: kept as given, resolved per listener by kcompat.config.listener_security
        self.security_props: dict[str, str] = {}
        cluster = "broker" in str((props or {}).get("process.roles", "")).split(",")
        for key, raw in (props or {}).items():
            definition = BROKER_CONFIGS.get(key)
            if is_security_key(key):
                self.security_props[key] = raw
                if definition is None:
                    if warn and (hint := unknown_security_key(key)) is not None:  # its value may be a secret
                        log.warning("unknown property %s ignored%s", key, hint)
                    continue
            if definition is None:
                reason = in_mode(
                    key, ignored_reason(key), cluster, defined=False
                )  # each prefix has a reason in both
                if reason is not None:
                    self.ignored[key] = reason
                    if warn:
                        log.info("property %s accepted and ignored: %s", key, reason)
                else:
                    self.unknown[key] = raw
                    if warn:
                        log.warning("unknown property %s=%r ignored%s", key, raw, topic_hint(key))
                continue
            self._static[key] = self._parse(definition, raw)
            ignored = in_mode(key, definition.ignored, cluster, defined=True)
            if ignored is not None and warn:
                log.info("property %s accepted and ignored: %s", key, ignored)
        # As Kafka does, either of node.id and broker.id given alone also sets the other.
        for name, other in (("node.id", "broker.id"), ("broker.id", "node.id")):
            if name in self._static and other not in self._static and self._static[name] >= 0:
                self._static[other] = self._static[name]
        self._check()

    def _parse(self, definition: ConfigDef, raw: str) -> Any:
        try:
            return definition.parse(raw)
        except ConfigError as exc:
            raise self._located(exc) from None

    def _located(self, exc: ConfigError) -> ConfigError:
        """The same error, saying where the offending value was set."""
        origin = self.origins.get(exc.key or "")
        if not origin:
            return exc
        return ConfigError(f"{exc} (set by {origin})", key=exc.key, value=exc.value)

    @staticmethod
    def _error(key: str, message: str) -> ConfigError:
        return ConfigError(message, key=key)

    # --- cross-property rules ---------------------------------------------------------------

    def _check(self) -> None:
        try:
            self._check_rules()
        except ConfigError as exc:
            raise self._located(exc) from None

    def _check_rules(self) -> None:
        node_id, broker_id = self._value("node.id"), self._value("broker.id")
        if broker_id != node_id and "node.id" in self._static:
            raise self._error("broker.id", f"broker.id={broker_id} and node.id={node_id} must be equal")
        if self._value("process.roles") == ["broker"]:
            # Kafka's rule (KAFKA-13153): a broker-only node may not share an id with a controller.
            voters = [v.split("@", 1)[0].strip() for v in self._value("controller.quorum.voters")]
            if str(node_id if node_id is not None else broker_id) in voters:
                raise self._error(
                    "node.id",
                    f"node.id={node_id} is a controller's id in controller.quorum.voters; "
                    "a broker needs an id of its own",
                )
        if self._value("log.dirs") is not None and not self._value("log.dirs"):
            raise self._error("log.dirs", "log.dirs is empty: expected at least one directory")
        if not self._value("log.dir") and self._value("log.dirs") is None:
            raise self._error("log.dir", "log.dir is empty: expected a directory")
        low, high = self._value("group.min.session.timeout.ms"), self._value("group.max.session.timeout.ms")
        if low > high:
            raise self._error(
                "group.min.session.timeout.ms",
                f"group.min.session.timeout.ms={low} is larger than group.max.session.timeout.ms={high}",
            )
        if (broken := group_bound_error(self._value)) is not None:
            raise self._error(*broken)
        self._parse_listeners()

    def _parse_listeners(self) -> None:
        """listeners, advertised.listeners, their protocols and controller.listener.names, parsed
        once: everyone else reads the typed results."""
        self._protocol_map = parse_protocol_map(
            "listener.security.protocol.map", self._value("listener.security.protocol.map")
        )
        self._controller_names = tuple(
            name.strip().upper() for name in self._value("controller.listener.names") or [] if name.strip()
        )
        declared = parse_listeners("listeners", self._value("listeners"), self._protocol_map)
        # Kafka maps a controller listener missing from listener.security.protocol.map to PLAINTEXT.
        self._controllers = [
            listener if listener.security_protocol else listener._replace(security_protocol="PLAINTEXT")
            for listener in declared
            if listener.name in self._controller_names
        ]
        self._listeners = self._served_listeners(declared)
        self._advertised = self._advertised_listeners(declared)
        self._security = parse_security(self._listeners, self.security_props)

    def _served_listeners(self, declared: list[Listener]) -> list[Listener]:
        served = []
        for listener in declared:
            if listener.name in self._controller_names:
                continue
            if not listener.security_protocol:
                raise self._error(
                    "listeners",
                    f"listeners entry {listener} has no security protocol: name it PLAINTEXT or map it in "
                    "listener.security.protocol.map",
                )
            served.append(listener)
        if not served:
            raise self._error("listeners", "listeners has no listener to serve clients on")
        ports = [listener.port for listener in served if listener.port != 0]
        if len(ports) != len(set(ports)):
            raise self._error("listeners", "listeners uses the same port twice")
        return served

    def _advertised_listeners(self, declared: list[Listener]) -> list[Listener]:
        raw = self._value("advertised.listeners")
        if raw is None:
            advertised = list(self._listeners)
            key = "listeners"
        else:
            advertised = parse_listeners("advertised.listeners", raw, self._protocol_map)
            key = "advertised.listeners"
            names = {listener.name for listener in declared}
            for listener in advertised:
                if listener.name not in names:
                    raise self._error(
                        key, f"advertised.listeners entry {listener} names no listener in listeners"
                    )
            # Kafka's combined-mode server.properties advertises its controller listener too;
            # kcompat does not serve it, so clients are not told of it.
            advertised = [listener for listener in advertised if listener.name not in self._controller_names]
            if not advertised:
                advertised, key = list(self._listeners), "listeners"
        for listener in advertised:
            if listener.host in _UNROUTABLE:
                raise self._error(
                    key,
                    f"{key} entry {listener} cannot be advertised to clients: set advertised.listeners "
                    "to a routable host",
                )
        return advertised

    # --- reading ------------------------------------------------------------------------------

    def _layer_of(self, name: str) -> ConfigSource | None:
        if name in self._dynamic:
            return ConfigSource.DYNAMIC_BROKER_CONFIG
        if name in self._dynamic_default:
            return ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        if name in self._static:
            return ConfigSource.STATIC_BROKER_CONFIG
        return None

    def _value(self, name: str) -> Any:
        for layer in (self._dynamic, self._dynamic_default, self._static):
            if name in layer:
                return layer[name]
        return BROKER_CONFIGS[name].default

    def is_set(self, name: str) -> bool:
        """True when the property was given (file, environment, --override or dynamically)."""
        return self._layer_of(name) is not None

    def raw(self, name: str) -> Any:
        """The property's own typed value or default (no unit chains), None when it has neither."""
        if name not in BROKER_CONFIGS:
            raise KeyError(f"unknown broker property {name!r}")
        return self._value(name)

    def get(self, name: str) -> Any:
        """The effective typed value of a broker property."""
        if name not in BROKER_CONFIGS:
            raise KeyError(f"unknown broker property {name!r}")
        chain = BROKER_SYNONYM_CHAINS.get(name)
        if chain is not None and chain[0].broker_name == name:
            return self._chain_value(name)
        if name == "log.dirs":
            return self.log_dirs
        if name == "node.id":
            return self.node_id
        return self._value(name)

    def _chain_value(self, head: str) -> Any:
        chain = BROKER_SYNONYM_CHAINS[head]
        for synonym in chain:
            if self.is_set(synonym.broker_name):
                value = self._value(synonym.broker_name)
                break
        else:
            synonym = next(s for s in reversed(chain) if BROKER_CONFIGS[s.broker_name].default is not None)
            value = BROKER_CONFIGS[synonym.broker_name].default
        value = value * synonym.scale
        if head == "log.retention.ms" and value < 0:
            return -1
        return value

    def source(self, name: str) -> ConfigSource:
        return self._layer_of(name) or ConfigSource.DEFAULT_CONFIG

    # --- typed views of the properties most code needs --------------------------------------

    @property
    def node_id(self) -> int:
        if not self.is_set("node.id") and self.is_set("broker.id"):
            return int(self._value("broker.id"))
        return int(self._value("node.id"))

    @property
    def listeners(self) -> list[Listener]:
        """The listeners to open (controller listeners left out)."""
        return list(self._listeners)

    @property
    def listener_security(self) -> dict[str, ListenerSecurity]:
        """Each served listener's TLS and SASL settings, by listener name."""
        return dict(self._security)

    @property
    def advertised_listeners(self) -> list[Listener]:
        """Addresses for Metadata; an empty host becomes this machine's host name, as Kafka does."""
        hostname = socket.gethostname()
        return [l if l.host else l._replace(host=hostname) for l in self._advertised]  # noqa: E741

    @property
    def controller_listeners(self) -> list[Listener]:
        """The listeners named in controller.listener.names: declared, never opened."""
        return list(self._controllers)

    @property
    def controller_listener_names(self) -> tuple[str, ...]:
        return self._controller_names

    @property
    def listener_security_protocol_map(self) -> dict[str, str]:
        """listener.security.protocol.map as NAME -> PROTOCOL, names and protocols upper-case."""
        return dict(self._protocol_map)

    @property
    def log_dirs(self) -> list[str]:
        dirs = self._value("log.dirs")
        return list(dirs if dirs is not None else self._value("log.dir"))

    @property
    def data_dir(self) -> str:
        """The directory kcompat keeps its logs in (the first of log.dirs)."""
        return self.log_dirs[0]

    @property
    def cluster_id(self) -> str | None:
        """The configured cluster id; None means use (or create) the one in meta.properties."""
        value = self._value("cluster.id")
        return str(value) if value is not None else None

    @property
    def log_retention_ms(self) -> int:
        return int(self._chain_value("log.retention.ms"))

    @property
    def log_roll_ms(self) -> int:
        return int(self._chain_value("log.roll.ms"))

    # --- dynamic changes ----------------------------------------------------------------------

    def with_dynamic(
        self, changes: Mapping[str, str | None], *, cluster_default: bool = False
    ) -> BrokerConfig:
        """A copy with run-time values set (a string) or removed (None) for this broker, or as the
        cluster-wide default when `cluster_default`. Only `dynamic` properties may change."""
        for key, raw in changes.items():
            definition = BROKER_CONFIGS.get(key)
            if definition is None:
                raise ConfigError(f"{key} is not a broker property kcompat knows", key=key, value=raw)
            if not definition.dynamic or key in RESTART_ONLY:
                raise ConfigError(
                    f"{key} cannot be changed at run time: set it in server.properties", key=key
                )
        clone = object.__new__(BrokerConfig)
        clone.__dict__.update(self.__dict__)
        clone._dynamic = dict(self._dynamic)
        clone._dynamic_default = dict(self._dynamic_default)
        layer = clone._dynamic_default if cluster_default else clone._dynamic
        for key, raw in changes.items():
            if raw is None:
                layer.pop(key, None)
            else:
                layer[key] = BROKER_CONFIGS[key].parse(raw)
        clone._check()
        return clone

    @property
    def dynamic_values(self) -> dict[str, str]:
        """This broker's run-time values in Kafka's string form (for persisting them)."""
        return {k: format_value(BROKER_CONFIGS[k].type, v) or "" for k, v in self._dynamic.items()}

    @property
    def dynamic_default_values(self) -> dict[str, str]:
        return {k: format_value(BROKER_CONFIGS[k].type, v) or "" for k, v in self._dynamic_default.items()}

    # --- DescribeConfigs ----------------------------------------------------------------------

    def synonyms_of(self, name: str, names: Iterable[str] | None = None) -> tuple[ConfigSynonym, ...]:
        """Kafka's synonym list for broker property `name` whose unit chain is `names` (default: just
        `name`): layer by layer (dynamic, cluster default, static, default), each layer in chain
        order, then everything before `name`'s first appearance dropped, as Kafka's ConfigHelper
        does (log.retention.minutes lists nothing when log.retention.ms is set)."""
        chain = list(names) if names is not None else [name]
        out: list[ConfigSynonym] = []
        for layer, source in (
            (self._dynamic, ConfigSource.DYNAMIC_BROKER_CONFIG),
            (self._dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            (self._static, ConfigSource.STATIC_BROKER_CONFIG),
        ):
            out.extend(
                ConfigSynonym(each, self._shown(BROKER_CONFIGS[each], layer[each]), source)
                for each in chain
                if each in layer
            )
        for each in chain:
            definition = BROKER_CONFIGS[each]
            if definition.default is not None:
                out.append(
                    ConfigSynonym(
                        each, self._shown(definition, definition.default), ConfigSource.DEFAULT_CONFIG
                    )
                )
        while out and out[0].name != name:
            out.pop(0)
        return tuple(out)

    @staticmethod
    def _shown(definition: ConfigDef, value: Any) -> str | None:
        return None if definition.sensitive else format_value(definition.type, value)

    def describe(
        self,
        names: Iterable[str] | None = None,
        *,
        include_synonyms: bool = True,
        include_documentation: bool = True,
        cluster_default: bool = False,
    ) -> list[ConfigEntry]:
        """DescribeConfigs rows for this broker (all properties when `names` is None), or with
        `cluster_default` for the "" resource: only the cluster-wide dynamic values, with only
        that layer in their synonyms, as Kafka 4.3 answers. Names kcompat does not know
        are left out, as Kafka does."""
        known = sorted(self._dynamic_default) if cluster_default else sorted(set(BROKER_CONFIGS) - INTERNAL)
        wanted = known if names is None else [n for n in names if n in known]
        entries = []
        for name in wanted:
            definition = BROKER_CONFIGS[name]
            chain = BROKER_SYNONYM_CHAINS.get(name)
            synonyms = self.synonyms_of(name, [s.broker_name for s in chain] if chain else None)
            value = self._value(name)
            if cluster_default:
                synonyms = tuple(
                    s for s in synonyms if s.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
                )
                value = self._dynamic_default[name]
            entries.append(
                ConfigEntry(
                    name=name,
                    value=self._shown(definition, value),
                    source=synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
                    read_only=not definition.dynamic,
                    sensitive=definition.sensitive,
                    type=definition.type,
                    documentation=definition.doc if include_documentation else "",
                    synonyms=synonyms if include_synonyms else (),
                )
            )
        return entries

    def __repr__(self) -> str:
        explicit = {**self._static, **self._dynamic_default, **self._dynamic}
        return f"BrokerConfig({', '.join(f'{k}={v!r}' for k, v in sorted(explicit.items()))})"
