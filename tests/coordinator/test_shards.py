"""Cluster mode's pure parts: the shard table (which __consumer_offsets partitions this broker
serves, and what a request for a group gets meanwhile) and a shard's load and unload in the
coordinator (Kafka's onElection / onResignation)."""

from __future__ import annotations

from kcompat.coordinator import GroupCoordinator
from kcompat.coordinator.records import offsets_partition
from kcompat.coordinator.shards import ShardState, ShardTable
from kcompat.wire.error_codes import ErrorCode as E

from .harness import Server
from .test_offsets import commit

N = 6


def groups_of(partition: int, count: int = 2) -> list[str]:
    """Group ids whose __consumer_offsets partition (of N) is `partition`."""
    out = [g for g in (f"g{i}" for i in range(500)) if offsets_partition(g, N) == partition]
    return out[:count]


def test_routing_is_kafkas_partition_of_the_group_id() -> None:
    table = ShardTable()
    table.num_partitions = 50
    # Java: "my-group".hashCode() == -1906497762, Math.abs(..) % 50 == 12 (Kafka's partitionFor)
    assert table.partition("my-group") == 12


def test_a_group_is_served_only_by_the_loaded_shard_of_its_partition() -> None:
    table = ShardTable()
    g = groups_of(2)[0]
    assert table.error(g) == E.NOT_COORDINATOR  # no __consumer_offsets yet
    table.num_partitions = N
    assert table.error(g) == E.NOT_COORDINATOR
    assert table.elect(2, 5)
    assert table.error(g) == E.COORDINATOR_LOAD_IN_PROGRESS
    assert table.loaded(2, 5)
    assert table.shards[2] == (ShardState.ACTIVE, 5)
    assert table.error(g) == E.NONE
    assert table.error(groups_of(3)[0]) == E.NOT_COORDINATOR
    assert table.resign(2)
    assert table.error(g) == E.NOT_COORDINATOR
    assert not table.resign(2)


def test_the_same_leadership_loads_once_and_a_new_one_loads_again() -> None:
    table = ShardTable()
    table.num_partitions = N
    assert table.elect(1, 0)
    assert not table.elect(1, 0)  # another image, same leadership: nothing to do
    assert table.loaded(1, 0)
    assert table.elect(1, 1)  # a new leader epoch: load again
    assert table.shards[1] == (ShardState.LOADING, 1)
    assert not table.loaded(1, 0)  # the load of the older leadership is thrown away
    assert table.loaded(1, 1)


def test_a_load_that_finishes_after_resignation_is_dropped() -> None:
    table = ShardTable()
    table.num_partitions = N
    table.elect(4, 3)
    table.resign(4)
    assert not table.loaded(4, 3)
    assert 4 not in table.shards


def test_unload_forgets_the_partitions_groups_and_returns_their_waiting_joins() -> None:
    srv = Server()
    here, there = groups_of(2, 1)[0], groups_of(3, 1)[0]
    for g in (here, there):
        assert commit(srv, g) == [0, 0]
    # a JoinGroup waiting in `here` (a second member joins a stable group: the first must rejoin)
    first = srv.answer(srv.join(here, v4=False))
    srv.sync(here, first.member_id, first.generation_id, {first.member_id: {"t": [0]}})
    waiting = srv.join(here)
    assert waiting.token is not None and srv.answer(waiting) is None
    tokens = srv.c.unload(lambda g: offsets_partition(g, N) == 2)
    assert tokens == [waiting.token]
    assert here not in srv.c.groups and here not in srv.c.offsets
    assert there in srv.c.offsets  # other shards are untouched


def test_load_brings_back_one_shard_beside_the_others() -> None:
    srv = Server()
    here, there = groups_of(2, 1)[0], groups_of(3, 1)[0]
    assert commit(srv, here) == [0, 0]
    records_of_here = list(srv.log)
    assert commit(srv, there) == [0, 0]
    # a broker that led partition 3 only, now elected for partition 2 too
    other = GroupCoordinator()
    other.load([r for r in srv.log if r not in records_of_here], 0)
    assert set(other.offsets) == {there}
    other.load(records_of_here, 1_000)
    assert set(other.offsets) == {here, there}
    assert other.offsets[here] == srv.c.offsets[here]
    other.unload(lambda g: offsets_partition(g, N) == 3)
    assert set(other.offsets) == {here}
