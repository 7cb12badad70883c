"""What a configuration property is: name, type, default, validator, importance, documentation.

Types and their string forms follow Apache Kafka's ConfigDef, because values reach us as strings
from server.properties, the environment, the command line and AlterConfigs requests, and clients
read our DescribeConfigs answers back as Kafka-formatted strings:

    BOOLEAN  "true" / "false", any case
    INT      32-bit signed decimal, SHORT 16-bit, LONG 64-bit ("+5" allowed, "1_000" not)
    DOUBLE   decimal or scientific notation, NaN, Infinity
    STRING   trimmed text          LIST  comma-separated, items trimmed, "" is the empty list
    CLASS    a class name          PASSWORD  like STRING, never shown

The numeric codes of ConfigType and ConfigSource are the ones DescribeConfigs carries.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, ClassVar

from kcompat.config.errors import ConfigError

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
SHORT_MIN, SHORT_MAX = -(2**15), 2**15 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
DOUBLE_MAX = 1.7976931348623157e308


class ConfigType(enum.IntEnum):
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(enum.IntEnum):
    """Where a value came from, as DescribeConfigs reports it."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class Importance(enum.Enum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


_INTEGER = re.compile(r"[+-]?[0-9]+")
_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)[fFdD]?")
_INT_RANGES = {
    ConfigType.INT: (INT_MIN, INT_MAX, "a 32-bit integer"),
    ConfigType.SHORT: (SHORT_MIN, SHORT_MAX, "a 16-bit integer"),
    ConfigType.LONG: (LONG_MIN, LONG_MAX, "a 64-bit integer"),
}


def _invalid(key: str, raw: str, expected: str) -> ConfigError:
    return ConfigError(f"{key}={raw!r} is invalid: expected {expected}", key=key, value=raw)


def parse_typed(key: str, config_type: ConfigType, raw: str) -> Any:
    """A string as the typed value Kafka would hold for it; ConfigError when it does not parse."""
    text = raw.strip()
    if config_type is ConfigType.BOOLEAN:
        lowered = text.lower()
        if lowered not in ("true", "false"):
            raise _invalid(key, raw, "true or false")
        return lowered == "true"
    if config_type in _INT_RANGES:
        low, high, what = _INT_RANGES[config_type]
        if not _INTEGER.fullmatch(text):
            raise _invalid(key, raw, what)
        number = int(text)
        if not low <= number <= high:
            raise _invalid(key, raw, f"{what} in [{low}, {high}]")
        return number
    if config_type is ConfigType.DOUBLE:
        if not _DOUBLE.fullmatch(text):
            raise _invalid(key, raw, "a number")
        return float(text.rstrip("fFdD").replace("Infinity", "inf"))
    if config_type is ConfigType.LIST:
        if not text:
            return []
        return [item.strip() for item in text.split(",")]
    return text


def java_double(value: float) -> str:
    """Double.toString's form: 0.5, 100.0, 1.0E7, 1.7976931348623157E308."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        text = repr(float(value))
        return text if ("." in text or "e" in text) else text + ".0"
    sign, digits, exponent = Decimal(repr(float(value))).as_tuple()
    assert isinstance(exponent, int)
    mantissa = "".join(str(d) for d in digits).rstrip("0") or "0"
    power = exponent + len(digits) - 1
    head, tail = mantissa[0], mantissa[1:] or "0"
    return f"{'-' if sign else ''}{head}.{tail}E{power}"


def format_value(config_type: ConfigType, value: Any) -> str | None:
    """The Kafka string form of a typed value (None stays None: "no value")."""
    if value is None:
        return None
    if config_type is ConfigType.BOOLEAN:
        return "true" if value else "false"
    if config_type is ConfigType.LIST:
        return ",".join(str(v) for v in value)
    if config_type is ConfigType.DOUBLE:
        return java_double(float(value))
    return str(value)


# --- validators -------------------------------------------------------------------------------


class Validator:
    """Checks a parsed value; `describe()` is the valid-values text shown in the docs."""

    def __call__(self, key: str, raw: str, value: Any) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - interface
        raise NotImplementedError


@dataclass(frozen=True)
class Range(Validator):
    """min <= value <= max; either bound may be open (None)."""

    low: float | None = None
    high: float | None = None

    def __call__(self, key: str, raw: str, value: Any) -> None:
        if value is None:
            return
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            raise _invalid(key, raw, self.expected())

    def expected(self) -> str:
        if self.high is None:
            return f"a value of at least {_num(self.low)}" if self.low is not None else "a number"
        if self.low is None:
            return f"a value of at most {_num(self.high)}"
        return f"a value between {_num(self.low)} and {_num(self.high)}"

    def describe(self) -> str:
        if self.high is None:
            return f"[{_num(self.low)},...]" if self.low is not None else "[...]"
        if self.low is None:
            return f"[...,{_num(self.high)}]"
        return f"[{_num(self.low)},...,{_num(self.high)}]"


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else java_double(x)


def at_least(low: float) -> Range:
    return Range(low=low)


def between(low: float, high: float) -> Range:
    return Range(low=low, high=high)


@dataclass(frozen=True)
class OneOf(Validator):
    """A string from a fixed set (Kafka compares some case-insensitively)."""

    choices: tuple[str, ...]
    case_sensitive: bool = True

    def __call__(self, key: str, raw: str, value: Any) -> None:
        if value is None:
            return
        candidates = self.choices if self.case_sensitive else tuple(c.lower() for c in self.choices)
        probe = value if self.case_sensitive else str(value).lower()
        if probe not in candidates:
            raise _invalid(key, raw, f"one of {', '.join(self.choices)}")

    def describe(self) -> str:
        return "[" + ", ".join(self.choices) + "]"


@dataclass(frozen=True)
class ListOf(Validator):
    """Every item of a LIST from a fixed set; `allow_empty` as Kafka allows per property."""

    choices: tuple[str, ...]
    allow_empty: bool = False

    def __call__(self, key: str, raw: str, value: Any) -> None:
        if value is None:
            return
        if not value and not self.allow_empty:
            raise _invalid(key, raw, f"a non-empty list of {', '.join(self.choices)}")
        bad = [item for item in value if item not in self.choices]
        if bad:
            raise _invalid(key, raw, f"a comma-separated list of {', '.join(self.choices)}")

    def describe(self) -> str:
        return "[" + ", ".join(self.choices) + "]"


@dataclass(frozen=True)
class Check(Validator):
    """A predicate with its own description, for rules no generic validator expresses."""

    predicate: Callable[[Any], bool]
    expected: str

    def __call__(self, key: str, raw: str, value: Any) -> None:
        if value is not None and not self.predicate(value):
            raise _invalid(key, raw, self.expected)

    def describe(self) -> str:
        return self.expected


# --- definitions ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigDef:
    """One property. `default` is the typed value (None: no value); `ignored` explains a property
    accepted for compatibility with Kafka's files but without effect in kcompat."""

    name: str
    type: ConfigType
    default: Any
    doc: str
    importance: Importance = Importance.MEDIUM
    validator: Validator | None = None
    dynamic: bool = False
    ignored: str | None = None

    @property
    def sensitive(self) -> bool:
        return self.type is ConfigType.PASSWORD

    @property
    def default_text(self) -> str | None:
        return format_value(self.type, self.default)

    def parse(self, raw: str) -> Any:
        """Parse and validate a string value for this property."""
        value = parse_typed(self.name, self.type, raw)
        if self.validator is not None:
            self.validator(self.name, raw, value)
        return value

    def valid_values(self) -> str:
        return self.validator.describe() if self.validator is not None else ""


class TypedAttributes:
    """Attribute access to typed values, for BrokerConfig and TopicConfig alike:
    `cfg.segment_bytes` is `cfg.get("segment.bytes")` (dots become underscores)."""

    _definitions: ClassVar[Mapping[str, ConfigDef]]
    _kind: ClassVar[str] = "property"

    def get(self, name: str) -> Any:  # pragma: no cover - interface
        raise NotImplementedError

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(attr)
        name = attr.replace("_", ".")
        if name in self._definitions:
            return self.get(name)
        raise AttributeError(f"{type(self).__name__} has no {self._kind} {name!r} ({attr})")


def table(defs: Iterable[ConfigDef]) -> dict[str, ConfigDef]:
    """Index definitions by name; a duplicate name is a bug in the table."""
    out: dict[str, ConfigDef] = {}
    for d in defs:
        if d.name in out:
            raise AssertionError(f"duplicate config definition {d.name}")
        out[d.name] = d
    return out


def render_table(defs: Sequence[ConfigDef], width: int = 100) -> str:
    """A plain-text table of properties for --help and `kcompat config-docs`."""
    lines = []
    for d in sorted(defs, key=lambda x: x.name):
        default = d.default_text
        shown = "(none)" if default is None else (default if default != "" else '""')
        head = f"  {d.name} = {shown}"
        extra = [d.type.name.lower()]
        if d.valid_values():
            extra.append(d.valid_values())
        if d.dynamic:
            extra.append("dynamic")
        lines.append(f"{head}   [{'; '.join(extra)}]")
        doc = d.doc if d.ignored is None else f"{d.doc} Ignored: {d.ignored}"
        lines.append("      " + doc)
    return "\n".join(lines)


# --- what DescribeConfigs reports -------------------------------------------------------------


@dataclass(frozen=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True)
class ConfigEntry:
    """One row of a DescribeConfigs answer, values already in Kafka's string form."""

    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    sensitive: bool
    type: ConfigType
    documentation: str
    synonyms: tuple[ConfigSynonym, ...] = ()
