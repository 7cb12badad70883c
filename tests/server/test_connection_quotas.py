"""connection_creation_rate per ip (ConnectionQuotas): Kafka's windowed rate, the `<default>` ip counted
per address, an address's own quota over the default, the refused connection taken back out."""

from __future__ import annotations

from kcompat.quotas.entities import CONNECTION_CREATION_RATE, IP, entity_of
from kcompat.quotas.rate import QuotaWindow
from kcompat.server.quotas.connection_quotas import ConnectionQuotas


def quotas(table: dict[str | None, float]) -> ConnectionQuotas:
    q = ConnectionQuotas(QuotaWindow(11, 1000))
    q.update({entity_of([(IP, name)]): {CONNECTION_CREATION_RATE: v} for name, v in table.items()})
    return q


def test_no_quota_admits_everyone() -> None:
    q = quotas({})
    assert not q.on
    assert all(q.admit("10.0.0.1", 0) == 0 for _ in range(1000))


def test_the_default_counts_each_address_on_its_own() -> None:
    # 11 samples of 1 s: the rate is measured over at least 10 s, so 2/s lets 20 in at once
    q = quotas({None: 2})
    assert [q.admit("10.0.0.1", 0) for _ in range(20)] == [0] * 20
    # the 21st would make 2.1/s: held (2.1 - 2) / 2 x 10 s, and not counted
    assert q.admit("10.0.0.1", 0) == 500
    assert q.admit("10.0.0.1", 0) == 500
    assert q.admit("10.0.0.2", 0) == 0  # another address has its own rate
    # once the first sample has left the 11 s window the address is served again
    assert q.admit("10.0.0.1", 11_500) == 0


def test_an_addresses_quota_wins_over_the_default_whatever_its_spelling() -> None:
    q = quotas({None: 100, "::1": 1})
    assert [q.admit("0:0:0:0:0:0:0:1", 0) for _ in range(10)] == [0] * 10
    # 11/10 s over 1/s: held (1.1 - 1) / 1 x 10 s
    assert q.admit("::1", 0) == 1000
    assert [q.admit("::1", 0) for _ in range(5)] == [1000] * 5
    assert all(q.admit("10.0.0.3", 0) == 0 for _ in range(100))


def test_a_removed_quota_admits_again() -> None:
    q = quotas({"10.0.0.1": 1})
    for _ in range(10):
        q.admit("10.0.0.1", 0)
    assert q.admit("10.0.0.1", 0) > 0
    q.update({})
    assert not q.on and q.admit("10.0.0.1", 0) == 0
