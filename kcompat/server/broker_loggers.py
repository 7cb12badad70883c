"""Broker loggers (ConfigResource type 8): kcompat's Python loggers as Kafka's broker-loggers.

`kafka-configs --entity-type broker-loggers --entity-name <id> --describe` lists every logger with
its effective level; `--alter --add-config kcompat.cluster=DEBUG` sets one at run time and
`--delete-config kcompat.cluster` unsets it (it then follows its parent), as Kafka's
LoggingController does for log4j. The root logger is `root`; its level may be set, never removed.
Levels are Kafka's names: TRACE (below Python's DEBUG), DEBUG, INFO, WARN, ERROR, FATAL.
"""

from __future__ import annotations

import logging

from kcompat.config import ConfigEntry, ConfigSource, ConfigType
from kcompat.config.topic_config import AlterOp
from kcompat.server.errors import ApiError
from kcompat.wire.error_codes import ErrorCode

BROKER_LOGGER = 8  # ConfigResource.Type.BROKER_LOGGER
ROOT_LOGGER = "root"
TRACE = 5
# Kafka's LogLevelConfig.VALID_LOG_LEVELS, with the Python level each sets.
LEVELS = {
    "FATAL": logging.CRITICAL,
    "ERROR": logging.ERROR,
    "WARN": logging.WARNING,
    "INFO": logging.INFO,
    "DEBUG": logging.DEBUG,
    "TRACE": TRACE,
}
_NAMES = sorted(((v, k) for k, v in LEVELS.items()), reverse=True)


def level_name(level: int) -> str:
    """Kafka's name for a Python level (the nearest at or below it; NOTSET shows as TRACE)."""
    for value, name in _NAMES:
        if level >= value:
            return name
    return "TRACE"


def _logger(name: str) -> logging.Logger | None:
    if name == ROOT_LOGGER:
        return logging.getLogger()
    found = logging.Logger.manager.loggerDict.get(name)
    return found if isinstance(found, logging.Logger) else None


def loggers() -> dict[str, str]:
    """Every logger kcompat has made, and root, with its effective level by Kafka's names."""
    out = {ROOT_LOGGER: level_name(logging.getLogger().getEffectiveLevel())}
    for name, obj in sorted(logging.Logger.manager.loggerDict.items()):
        if isinstance(obj, logging.Logger):
            out[name] = level_name(obj.getEffectiveLevel())
    return out


def describe(names: list[str] | None) -> list[ConfigEntry]:
    known = loggers()
    wanted = list(known) if names is None else [n for n in names if n in known]
    return [
        ConfigEntry(
            name=n,
            value=known[n],
            source=ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG,
            read_only=False,
            sensitive=False,
            type=ConfigType.STRING,
            documentation="",
        )
        for n in wanted
    ]


def alter(ops: list[tuple[str, int, str | None]], validate_only: bool) -> None:
    """IncrementalAlterConfigs on broker loggers, checked whole before any is applied (Kafka's
    ConfigAdminManager.validateLogLevelConfigs messages)."""
    changes: list[tuple[logging.Logger, int]] = []
    for name, op, value in ops:
        if op in (AlterOp.APPEND, AlterOp.SUBTRACT):
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                f"{AlterOp(op).name} operation is not allowed for the BROKER_LOGGER resource",
            )
        target = _logger(name)
        if target is None:
            raise ApiError(ErrorCode.INVALID_CONFIG, f"Logger {name} does not exist!")
        if op == AlterOp.DELETE:
            if name == ROOT_LOGGER:
                raise ApiError(
                    ErrorCode.INVALID_REQUEST,
                    f"Removing the log level of the {ROOT_LOGGER} logger is not allowed",
                )
            changes.append((target, logging.NOTSET))
            continue
        if value not in LEVELS:
            raise ApiError(
                ErrorCode.INVALID_CONFIG,
                f"Cannot set the log level of {name} to {value} as it is not a supported log level. "
                f"Valid log levels are {', '.join(LEVELS)}",
            )
        changes.append((target, LEVELS[value]))
    if not validate_only:
        for target, level in changes:
            target.setLevel(level)
