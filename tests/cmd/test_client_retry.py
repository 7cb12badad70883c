"""A coordinator that is loading or moving is asked again until the timeout, not reported: a fresh
Kafka answers COORDINATOR_NOT_AVAILABLE, then COORDINATOR_LOAD_IN_PROGRESS, while it creates
__consumer_offsets for the first group."""

from __future__ import annotations

import pytest

from kcompat.client.cluster import Cluster, retry_coordinator
from kcompat.client.errors import KafkaError
from kcompat.wire.error_codes import ErrorCode


def flaky(codes: list[int]) -> tuple[list[int], object]:
    calls: list[int] = []

    def call() -> str:
        calls.append(1)
        if len(calls) <= len(codes):
            raise KafkaError(codes[len(calls) - 1], "group g")
        return "answer"

    return calls, call


def test_transient_coordinator_errors_are_retried() -> None:
    cluster = Cluster("127.0.0.1:1", timeout=5)
    codes = [
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.NOT_COORDINATOR,
    ]
    calls, call = flaky(codes)
    assert retry_coordinator(cluster, call) == "answer"  # type: ignore[arg-type]
    assert len(calls) == 4


def test_other_errors_and_the_timeout_end_it() -> None:
    calls, call = flaky([ErrorCode.GROUP_AUTHORIZATION_FAILED])
    with pytest.raises(KafkaError, match="GROUP_AUTHORIZATION_FAILED"):
        retry_coordinator(Cluster("127.0.0.1:1", timeout=5), call)  # type: ignore[arg-type]
    assert len(calls) == 1
    calls, call = flaky([ErrorCode.COORDINATOR_LOAD_IN_PROGRESS] * 1000)
    with pytest.raises(KafkaError, match="COORDINATOR_LOAD_IN_PROGRESS"):
        retry_coordinator(Cluster("127.0.0.1:1", timeout=0.3), call)  # type: ignore[arg-type]
    assert 2 <= len(calls) < 10
