"""The transaction coordinator of a single node is built by the first request that needs it
(issue 31: a start with no `__transaction_state` loads none of its modules), and at start when
`__transaction_state` is in the log dir (its transactions are replayed there, as before)."""

from __future__ import annotations

from kcompat.storage.topic_store import TRANSACTION_STATE
from kcompat.wire.error_codes import ErrorCode as E
from tests.server.broker_harness import BrokerHarness
from tests.server.test_transactions import clock, h, init, produce
from tests.server.test_transactions_v2 import end5, produce12

__all__ = ["clock", "h"]  # the fixtures, shared with test_transactions


def test_the_first_transactional_request_builds_the_coordinator(h: BrokerHarness) -> None:
    svc = h.broker.txn_service
    assert svc._coordinator is None and svc._timers == []  # started without building it
    r = init(h, version=5)
    assert r.error_code == 0
    assert svc._coordinator is not None and len(svc._timers) == 2  # its timers run from now on
    assert h.broker.metadata.topic(TRANSACTION_STATE) is not None
    assert produce12(h, r.producer_id, 0, 0, b"c0") == 0
    assert end5(h, r.producer_id, 0, True) == (0, r.producer_id, 1)


def test_a_transactional_batch_first_gets_the_coordinators_answer(h: BrokerHarness) -> None:
    # No transactional request yet: the batch is verified by a coordinator built for it, which
    # never registered the producer (not COORDINATOR_NOT_AVAILABLE, as before the start).
    assert produce(h, 99_999, 0, 0, b"x").error_code == E.INVALID_PRODUCER_ID_MAPPING
    assert h.broker.txn_service._coordinator is not None


def test_transactions_are_replayed_at_start(h: BrokerHarness) -> None:
    pid = init(h, version=5).producer_id
    assert produce12(h, pid, 0, 0, b"c0") == 0
    h.restart()
    svc = h.broker.txn_service
    assert svc._coordinator is not None  # built at start: __transaction_state is in the log dir
    m = svc.coordinator.txns["tx"]
    assert (m.producer_id, m.state.kafka_name) == (pid, "Ongoing")
