"""The pure quota maths: Kafka's windowed rate and throttle time, the precedence of quota entities,
and ClientQuotaControlManager's validation."""

from __future__ import annotations

import pytest

from kcompat.quotas.entities import (
    CLIENT_ID,
    PRODUCER_BYTE_RATE,
    USER,
    DescribeFilter,
    QuotaError,
    entity_of,
    resolve,
    validate_alteration,
)
from kcompat.quotas.rate import QuotaWindow, Rate


def test_rate_counts_at_least_samples_minus_one_windows() -> None:
    """A new sensor measures over 10 full windows (11 samples of 1 s), not the 1 ms elapsed."""
    rate = Rate(QuotaWindow(11, 1000))
    rate.add(10_000, 0)
    assert rate.measure(1) == pytest.approx(10_000 / 10.001)
    # Steady 1000 B every 100 ms (10 kB/s) for 20 s: the rate is 10 kB/s over the live window.
    rate = Rate(QuotaWindow(11, 1000))
    for t in range(0, 20_000, 100):
        rate.add(1000, t)
    assert rate.measure(20_000) == pytest.approx(10_000, rel=0.1)


def test_throttle_time_brings_the_rate_back_to_the_bound() -> None:
    """X = (O - T) / T * W (QuotaUtils.throttleTime), W the window the rate was measured over."""
    rate = Rate(QuotaWindow(11, 1000))
    assert rate.record(5_000, 10_000, 0) == 0  # 5 kB over 10 s: 500 B/s, within 10 kB/s
    ms = rate.record(200_000, 10_000, 10)  # 205 kB over 10.01 s: ~20.5 kB/s
    size = rate.window_size_ms(10)
    assert ms == round((205_000 * 1000 / size - 10_000) / 10_000 * size)
    assert size == 10_010 and ms == 10_490  # (20_479.5 - 10_000) / 10_000 * 10_010


def test_samples_expire_after_the_whole_window() -> None:
    rate = Rate(QuotaWindow(3, 1000))
    rate.add(3000, 0)
    assert rate.measure(100) > 0
    assert rate.measure(3000) == 0  # last event 3 windows old: purged


def test_precedence_is_kafkas() -> None:
    """user+client > user+<default client> > user > <default user>+client > <default>+<default>
    > <default user> > client > <default client>; the sensor is shared as Kafka's tags share it."""
    alice_app = entity_of([(USER, "alice"), (CLIENT_ID, "app")])
    table = {
        entity_of([(CLIENT_ID, None)]): {PRODUCER_BYTE_RATE: 8.0},
        entity_of([(CLIENT_ID, "app")]): {PRODUCER_BYTE_RATE: 7.0},
        entity_of([(USER, None)]): {PRODUCER_BYTE_RATE: 6.0},
        entity_of([(USER, "alice")]): {PRODUCER_BYTE_RATE: 3.0},
        alice_app: {PRODUCER_BYTE_RATE: 1.0},
    }
    assert resolve(table, PRODUCER_BYTE_RATE, "alice", "app") == (alice_app, 1.0)
    assert resolve(table, PRODUCER_BYTE_RATE, "alice", "other") == (entity_of([(USER, "alice")]), 3.0)
    # bob: the <default> user quota, on a sensor of bob's own
    assert resolve(table, PRODUCER_BYTE_RATE, "bob", "app") == (entity_of([(USER, "bob")]), 6.0)
    del table[entity_of([(USER, None)])]
    assert resolve(table, PRODUCER_BYTE_RATE, "bob", "app") == (entity_of([(CLIENT_ID, "app")]), 7.0)
    assert resolve(table, PRODUCER_BYTE_RATE, "bob", "x") == (entity_of([(CLIENT_ID, "x")]), 8.0)
    assert resolve(table, "consumer_byte_rate", "alice", "app") is None


@pytest.mark.parametrize(
    ("pairs", "ops", "message"),
    [
        ([("group", "g")], [(PRODUCER_BYTE_RATE, 1.0)], "Unhandled client quota entity type: group"),
        ([(USER, "a")], [(PRODUCER_BYTE_RATE, -5.0)], "Quota producer_byte_rate must be greater than 0"),
        ([(USER, "a")], [("producer_bytes", 5.0)], "Invalid configuration key producer_bytes"),
        ([(USER, "a")], [(PRODUCER_BYTE_RATE, 1.5)], "producer_byte_rate cannot be a fractional value."),
        ([], [(PRODUCER_BYTE_RATE, 1.0)], "Invalid empty client quota entity"),
        ([(USER, "a"), (USER, "b")], [], "Invalid client quota entity, duplicate entity entry user"),
        ([(USER, "a"), ("ip", "1.2.3.4")], [], "IP entity"),
    ],
)
def test_invalid_alterations(
    pairs: list[tuple[str, str | None]], ops: list[tuple[str, float | None]], message: str
) -> None:
    with pytest.raises(QuotaError) as e:
        validate_alteration(pairs, ops)
    assert e.value.code == "INVALID_REQUEST"
    assert message in e.value.message


def test_valid_alteration_and_describe_filter() -> None:
    entity, ops = validate_alteration(
        [(USER, "a"), (CLIENT_ID, None)], [("request_percentage", 12.5), (PRODUCER_BYTE_RATE, None)]
    )
    assert entity == ((CLIENT_ID, None), (USER, "a"))
    assert ops == {"request_percentage": 12.5, PRODUCER_BYTE_RATE: None}
    f = DescribeFilter.of([(USER, 0, "a")], strict=False)
    assert f.matches(entity) and f.matches(((USER, "a"),))
    assert not DescribeFilter.of([(USER, 0, "a")], strict=True).matches(entity)
    assert DescribeFilter.of([(CLIENT_ID, 1, None)], strict=False).matches(entity)
    with pytest.raises(QuotaError) as e:
        DescribeFilter.of([("group", 2, None)], strict=False)
    assert e.value.code == "UNSUPPORTED_VERSION"
