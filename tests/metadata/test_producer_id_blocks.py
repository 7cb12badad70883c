"""Producer-id blocks from the controller (Kafka's RPCProducerIdManager): ids in order from the
current block, one request for the next block once 90% is given out, none while one is in flight or
a block is waiting, COORDINATOR_LOAD_IN_PROGRESS (None here) with no block, backoff after a failure."""

from __future__ import annotations

from kcompat.metadata.producer_id_blocks import RETRY_BACKOFF_MS, ProducerIdBlock, ProducerIdBlocks


def test_no_block_asks_once_and_gives_no_id() -> None:
    blocks = ProducerIdBlocks()
    assert blocks.next_id(0) == (None, True)
    assert blocks.next_id(1) == (None, False)  # already in flight: no second request
    assert blocks.on_block(5000, 10)
    assert blocks.next_id(2) == (5000, False)


def test_prefetch_at_ninety_percent_then_switch_without_a_gap() -> None:
    blocks = ProducerIdBlocks()
    blocks.next_id(0)
    blocks.on_block(0, 10)
    got = [blocks.next_id(0) for _ in range(10)]
    assert [pid for pid, _ in got] == list(range(10))
    assert [send for _, send in got] == [False] * 9 + [
        True
    ]  # id 9 = start + 0.9 * 10: ask for the next block
    blocks.on_block(1000, 10)
    assert blocks.next_id(0) == (1000, False)  # the prefetched block follows at once
    assert blocks.current == ProducerIdBlock(1000, 10) and blocks.next_block is None


def test_exhausted_without_next_block_gives_none_and_asks() -> None:
    blocks = ProducerIdBlocks()
    blocks.next_id(0)
    blocks.on_block(0, 2)
    assert blocks.next_id(0) == (0, False)
    assert blocks.next_id(0) == (1, True)  # prefetch_at = 0 + int(1.8) = 1
    assert blocks.next_id(0) == (None, False)  # the request is still out
    blocks.on_block(2, 2)
    assert blocks.next_id(0) == (2, False)


def test_failure_backs_off_before_asking_again() -> None:
    blocks = ProducerIdBlocks()
    assert blocks.next_id(100) == (None, True)
    blocks.on_failure(100)
    assert blocks.next_id(100 + RETRY_BACKOFF_MS - 1) == (None, False)
    assert blocks.next_id(100 + RETRY_BACKOFF_MS) == (None, True)


def test_an_invalid_block_is_refused() -> None:
    blocks = ProducerIdBlocks()
    blocks.next_id(0)
    assert not blocks.on_block(-1, 1000)
    assert not blocks.in_flight and blocks.next_block is None
    blocks.next_id(0)
    assert not blocks.on_block(0, 0)
    assert not blocks.on_block(2**63 - 5, 10)
