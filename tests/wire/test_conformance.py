"""Every declared message, version by version and field by field, against Kafka's own specs."""

from __future__ import annotations

from pathlib import Path

import pytest

from kcompat.wire.messages import (
    APIS,
    consumer_protocol,
    group_records,
    headers,
    metadata_records,
    raft_control_records,
    raft_records,
    txn_records,
)
from kcompat.wire.schema import Message, VersionRange

from .schema_reference import (
    SHARED_SPECS,
    defaults_of_ours,
    defaults_of_spec,
    find_spec,
    kafka_python_specs,
    load_resolved,
    shape_of_ours,
    shape_of_spec,
)

MESSAGES: list[Message] = [m for a in APIS.values() for m in (a.request, a.response)]
for module in (
    headers,
    consumer_protocol,
    group_records,
    txn_records,
    metadata_records,
    raft_records,
    raft_control_records,
):
    MESSAGES += [v for v in vars(module).values() if isinstance(v, Message)]

REQUIRED_APIS = {
    0,
    1,
    2,
    3,
    8,
    9,
    10,
    11,
    12,
    13,
    14,
    15,
    16,
    17,
    18,
    19,
    20,
    21,
    22,
    23,
    24,
    25,
    26,
    27,
    28,
    29,
    30,
    31,
    32,
    33,
    35,
    36,
    37,
    42,
    44,
    47,
    60,
    61,
    65,
    66,
    68,
    69,
    75,
}  # the APIs issue 2 lists by name


def _versions(r: VersionRange) -> range:
    assert r.high is not None
    return range(r.low, r.high + 1)


def test_required_apis_are_declared() -> None:
    assert set(APIS) >= REQUIRED_APIS, sorted(REQUIRED_APIS - set(APIS))


def _compare(message: Message, spec_path: Path, versions: range) -> int:
    spec = load_resolved(spec_path)
    compared = 0
    for v in versions:
        assert shape_of_ours(message.fields, v) == shape_of_spec(spec["fields"], v), f"{message.name} v{v}"
        compared += 1
    return compared


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: m.name)
def test_matches_official_specs(message: Message) -> None:
    if not SHARED_SPECS.is_dir():
        pytest.fail(f"reference specs missing at {SHARED_SPECS}")
    path = find_spec(SHARED_SPECS, message)
    assert path is not None, f"no official spec for {message.name}"
    spec = load_resolved(path)
    assert str(message.versions) == str(VersionRange.parse(spec["validVersions"]))
    assert str(message.flexible) == str(VersionRange.parse(spec["flexibleVersions"]))
    assert _compare(message, path, _versions(message.versions)) == len(_versions(message.versions))
    assert defaults_of_ours(message.fields) | defaults_of_spec(spec["fields"]) == defaults_of_ours(
        message.fields
    )


def test_matches_kafka_python_specs() -> None:
    """kafka-python ships newer (4.x) specs: every version both define must agree field by field."""
    specs = kafka_python_specs()
    assert specs is not None, "kafka-python's specs are not installed"
    compared = 0
    messages = 0
    for message in MESSAGES:
        path = find_spec(specs, message)
        if path is None:
            continue
        theirs = VersionRange.parse(load_resolved(path)["validVersions"])
        common = [v for v in _versions(message.versions) if v in theirs]
        if common:
            messages += 1
            compared += _compare(message, path, range(common[0], common[-1] + 1))
    # kafka-python ships the client-facing specs: most of ours must have been checked
    assert messages >= 100, messages
    assert compared >= 400, compared
