"""The one exception configuration problems raise."""

from __future__ import annotations


class ConfigError(ValueError):
    """An invalid or unusable configuration value; str(error) is one line naming key, value and rule.

    `key` and `value` are kept so protocol handlers can answer INVALID_CONFIG with the same text.
    """

    def __init__(self, message: str, key: str | None = None, value: str | None = None) -> None:
        super().__init__(" ".join(message.split()))
        self.key = key
        self.value = value
