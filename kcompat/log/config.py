"""Per-topic log settings: kcompat.config's LogConfig, a frozen set of typed values the broker
builds from a topic's config (TopicConfig.log_config()). The log parses no configuration and keeps
no defaults of its own; those are the config definitions'."""

from __future__ import annotations

from kcompat.config.definition import LONG_MAX
from kcompat.config.log_config import LogConfig

__all__ = ["LONG_MAX", "LogConfig"]
