"""GroupConfigs: the configs set on each group (ConfigResource type 32), Kafka's GroupConfigManager.

    overrides(group_id) ──► only the keys set on that group: the KIP-848 coordinator reads
                            consumer.session.timeout.ms / consumer.heartbeat.interval.ms from it on
                            every heartbeat, the share-group side its share.* keys
    describe / validate / alter ──► DescribeConfigs, (Incremental)AlterConfigs (handlers/configs.py)

Where they live is the MetadataView's business: a single node's kcompat-resource-configs.json
(kcompat/storage/resource_configs.py), or the KRaft image's ConfigRecords in cluster mode, where
AlterConfigs goes to the controller (forwarded, as for topic configs) and comes back as records.
Read through on every call, so a change applies at once to a running group.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kcompat.config import ConfigEntry, ConfigError
from kcompat.config.group_config import GROUP, describe_group_configs, group_value, validate_group_configs
from kcompat.server.errors import ApiError
from kcompat.server.metadata_view import MetadataView
from kcompat.wire.error_codes import ErrorCode


class GroupConfigs:
    def __init__(self, metadata: MetadataView) -> None:
        self._metadata = metadata

    def overrides(self, group_id: str) -> Mapping[str, str]:
        """Only the keys set on `group_id` (empty when none)."""
        return self._metadata.resource_configs(GROUP, group_id)

    def value(self, group_id: str, name: str) -> Any:
        """The typed value the group runs with: its override, else the broker's, else the default."""
        return group_value(self._metadata.config, self.overrides(group_id), name)

    def names(self) -> list[str]:
        """Every group with configs set (ListConfigResources)."""
        return self._metadata.resource_names(GROUP)

    def describe(
        self, group_id: str, names: Iterable[str] | None, *, synonyms: bool, documentation: bool
    ) -> list[ConfigEntry]:
        return describe_group_configs(
            self._metadata.config,
            self.overrides(group_id),
            names,
            include_synonyms=synonyms,
            include_documentation=documentation,
        )

    def alter(self, group_id: str, configs: Mapping[str, str], *, validate_only: bool) -> None:
        """Replace the group's configs with `configs` after Kafka's GroupConfig.validate."""
        if not group_id:
            raise ApiError(ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")
        try:
            checked = validate_group_configs(self._metadata.config, configs)
        except ConfigError as e:
            raise ApiError(ErrorCode.INVALID_CONFIG, str(e)) from None
        if not validate_only:
            self._metadata.alter_resource_configs(GROUP, group_id, checked)
