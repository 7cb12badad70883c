"""Cluster mode's transaction side on a single-node test broker without sockets: the broker's own
logs become cluster-mode Partitions whose leadership a test sets, and the transaction service's
writes become cluster mode's replicated ones, as server/cluster/assembly.py builds them."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kcompat.server.cluster.replication.partition import Partition, Registration
from kcompat.server.cluster.txn_channels import BrokerChannels, TxnMarkerSender, TxnVerifier
from kcompat.server.cluster.txn_shards import TxnShards
from kcompat.server.cluster.txn_writes import ReplicatedTxnWrites

FOLLOWER = 2  # the other replica of every partition; a test stands in for its fetches
UNKNOWN = Registration(-1, -1, -1, (), ())


class NoEndpoints:
    """The single-node metadata, with no endpoint for any broker: a coordinator elsewhere cannot be asked."""

    def __init__(self, metadata: Any) -> None:
        self.topic = metadata.topic
        self.leader_and_epoch = metadata.leader_and_epoch

    def broker_endpoint(self, node_id: int, listener: str) -> None:
        return None


def follower_partitions(broker: Any, keys: Iterable[tuple[str, int]]) -> dict[tuple[str, int], Partition]:
    """The replicas cluster mode's assembly would hand the replica manager: each of `keys` on the
    broker's own log, followed from FOLLOWER (this broker in the ISR)."""
    node = broker.node_id
    parts: dict[tuple[str, int], Partition] = {}
    for topic, i in keys:
        part = Partition(topic, i, node, broker.replicas.partition_log(topic, i), UNKNOWN)
        part.make_follower(Registration(FOLLOWER, 0, 0, (node, FOLLOWER), (node, FOLLOWER)))
        parts[(topic, i)] = part
    broker.replicas.partitions = parts
    return parts


def lead(broker: Any, part: Partition, *, alone: bool = False) -> None:
    """This broker becomes `part`'s leader at epoch 1, with FOLLOWER in its ISR unless `alone`."""
    replicas = (broker.node_id,) if alone else (broker.node_id, FOLLOWER)
    part.make_leader(Registration(broker.node_id, 1, 1, replicas, replicas), now_ms=broker.now_ms())


@dataclass
class ReplicatedTxnRig:
    shards: TxnShards
    markers: TxnMarkerSender
    writes: ReplicatedTxnWrites


def replicated_txn_writes(
    broker: Any, parts: dict[tuple[str, int], Partition], clock: Callable[[], float] = time.monotonic
) -> ReplicatedTxnRig:
    """The transaction service's writes become cluster mode's: shards that follow the partitions'
    leadership, markers written here as leader (the single-node metadata names this broker as
    every leader) and a verifier that can ask no other broker."""
    svc, node = broker.txn_service, broker.node_id
    shards = TxnShards(svc, partitions=parts, waiters=broker.replicas.fetch_waiters,
                       topic=broker.metadata.topic, timeout_ms=lambda: 30_000, clock=clock)  # fmt: skip
    markers = TxnMarkerSender(BrokerChannels(broker.metadata, "PLAINTEXT", node), write_local=svc.write_marker,
                              partitions=parts, waiters=broker.replicas.fetch_waiters)  # fmt: skip
    verifier = TxnVerifier(BrokerChannels(NoEndpoints(broker.metadata), "PLAINTEXT", node))
    svc.writes = writes = ReplicatedTxnWrites(svc, shards=shards, markers=markers, verifier=verifier)
    return ReplicatedTxnRig(shards, markers, writes)
