"""Every declared message, version by version and field by field, against Kafka's official specs.

The specs are reference data that never enter the repository: they sit beside it, in
../shared/kafka-protocol-4.3 (as Kafka 4.3.1's jars ship them). Without that folder (a plain clone)
this module is skipped as a whole; test_kafka_python_specs.py still checks the messages against the
specs kafka-python ships.
"""

from __future__ import annotations

import pytest

from kcompat.wire.schema import Message, VersionRange

from .schema_reference import (
    MESSAGES,
    SHARED_SPECS,
    compare,
    defaults_of_ours,
    defaults_of_spec,
    find_spec,
    load_resolved,
    versions,
)

if not SHARED_SPECS.is_dir():
    pytest.skip(
        f"Kafka's official protocol specs are not at {SHARED_SPECS} (reference data kept beside the "
        "repository, not in it)",
        allow_module_level=True,
    )


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: m.name)
def test_matches_official_specs(message: Message) -> None:
    path = find_spec(SHARED_SPECS, message)
    assert path is not None, f"no official spec for {message.name}"
    spec = load_resolved(path)
    assert str(message.versions) == str(VersionRange.parse(spec["validVersions"]))
    assert str(message.flexible) == str(VersionRange.parse(spec["flexibleVersions"]))
    assert compare(message, path, versions(message.versions)) == len(versions(message.versions))
    assert defaults_of_ours(message.fields) | defaults_of_spec(spec["fields"]) == defaults_of_ours(
        message.fields
    )
