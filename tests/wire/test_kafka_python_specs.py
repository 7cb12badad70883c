"""Every declared message against the specs kafka-python ships (newer 4.x ones, as package data),
and the APIs kcompat must declare; test_conformance.py checks them against Kafka's official specs."""

from __future__ import annotations

from kcompat.wire.messages import APIS
from kcompat.wire.schema import VersionRange

from .schema_reference import MESSAGES, compare, find_spec, kafka_python_specs, load_resolved, versions

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


def test_required_apis_are_declared() -> None:
    assert set(APIS) >= REQUIRED_APIS, sorted(REQUIRED_APIS - set(APIS))


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
        common = [v for v in versions(message.versions) if v in theirs]
        if common:
            messages += 1
            compared += compare(message, path, range(common[0], common[-1] + 1))
    # kafka-python ships the client-facing specs: most of ours must have been checked
    assert messages >= 100, messages
    assert compared >= 400, compared
