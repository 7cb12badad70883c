"""The handler seam: a RequestContext holds the broker's services, never the Broker, and the
handlers (and the access checks they call) reach only what it names."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import pytest

from kcompat.config import BrokerConfig
from kcompat.server.context import BrokerIdentity, RequestContext
from kcompat.wire.messages.offset_commit import OFFSET_COMMIT
from kcompat.wire.messages.produce import PRODUCE
from tests.server.broker_harness import BrokerHarness, batch
from tests.server.groups_harness import FakeClock

SERVER = Path(__file__).resolve().parents[2] / "kcompat" / "server"
SEAM = sorted([*(SERVER / "handlers").glob("*.py"), *(SERVER / "auth").glob("*.py")])


@pytest.mark.parametrize("path", SEAM, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_handlers_neither_import_nor_reach_the_broker(path: Path) -> None:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.module != "kcompat.server.broker", f"{path.name}:{node.lineno} imports the broker"
        elif isinstance(node, ast.Import):
            assert all(a.name != "kcompat.server.broker" for a in node.names), path.name
        elif isinstance(node, ast.Attribute) and node.attr == "broker":
            raise AssertionError(f"{path.name}:{node.lineno} reads .broker")


def test_context_reads_the_services_the_broker_built(tmp_path: Path) -> None:
    clock = FakeClock()
    h = BrokerHarness(tmp_path, {"broker.rack": "r1", "node.id": "3"}, clock=clock)
    try:
        broker = h.broker
        client = SimpleNamespace(listener="PLAINTEXT", host="127.0.0.1", principal="User:ANONYMOUS")
        ctx = RequestContext(broker.services, client, SimpleNamespace(api_version=7))
        assert not hasattr(ctx, "broker")
        assert ctx.metadata is broker.metadata and ctx.replicas is broker.replicas
        assert ctx.groups is broker.group_service and ctx.transactions is broker.txn_service
        assert ctx.stats is broker.stats and ctx.fetch_sessions is broker.fetch_sessions
        assert ctx.scram is broker.scram and ctx.authorizer is None
        assert ctx.config is broker.config and ctx.version == 7
        assert (ctx.identity.node_id, ctx.identity.rack, ctx.identity.cluster_id) == (
            3,
            "r1",
            broker.cluster_id,
        )
        assert ctx.identity.cluster_id != ""  # known once started
        assert (ctx.listener, ctx.endpoint) == ("PLAINTEXT", ("127.0.0.1", 19092))
        assert ctx.now_ms == int(clock.now * 1000)
        assert ctx.fetch_max_bytes == 57671680
        assert ctx.forwarded_versions() == {}  # a single node forwards nothing to a controller
    finally:
        h.close()


def test_identity_advertises_the_bound_port_for_a_port_0_listener(tmp_path: Path) -> None:
    config = BrokerConfig(
        {
            "log.dirs": str(tmp_path),
            "listeners": "PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:9999",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
        }
    )
    identity = BrokerIdentity(config)
    assert identity.endpoint(None) == ("127.0.0.1", 0)
    identity.bound("PLAINTEXT", 40123)
    identity.bound("OTHER", 40124)  # not port 0: what it advertises stays
    assert identity.endpoint(None) == ("127.0.0.1", 40123) == identity.endpoint("PLAINTEXT")
    assert identity.endpoint("OTHER") == ("127.0.0.1", 9999)
    assert identity.endpoint("UNKNOWN") == ("127.0.0.1", 40123)
    assert identity.log_dirs == [tmp_path.absolute()] and identity.rack is None


def test_group_snapshot_is_the_read_model_of_groups_and_offsets(tmp_path: Path) -> None:
    h = BrokerHarness(tmp_path)
    try:
        assert dict(h.broker.group_service.snapshot().committed) == {}
        produce = {"acks": 1, "timeout_ms": 1000,
                   "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch(b"a", b"b")}]}]}  # fmt: skip
        assert h.call(PRODUCE, 9, produce).responses[0].partition_responses[0].error_code == 0
        body = {
            "group_id": "g",
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 2}]}],
        }
        assert h.call(OFFSET_COMMIT, 8, body).topics[0].partitions[0].error_code == 0
        read = h.broker.group_service.snapshot()
        assert {g: dict(o) for g, o in read.committed.items()} == {"g": {("t", 0): 2}}
        assert len(read.groups["g"].members) == 0  # a simple consumer's commit: an empty group
    finally:
        h.close()
