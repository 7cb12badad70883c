"""Leader discovery under a three-voter Kafka quorum: the broker is pointed first at controllers
that are not the Raft leader, so its registration meets NOT_CONTROLLER and its metadata Fetch meets
NOT_LEADER_OR_FOLLOWER with CurrentLeader/NodeEndpoints; it must still register, be unfenced and
follow the metadata log."""

from __future__ import annotations

from support import ClusterBrokerFactory, kafka_tool

from kcompat.testing import wait_until
from kcompat.testing_cluster import ControllerQuorum

BROKER_ID = 7


def quorum_status(quorum: ControllerQuorum) -> dict[str, str]:
    # Just after start the controllers answer "Direct-to-controller communication is not supported
    # with the current MetadataVersion" until the bootstrap metadata version is committed: ask again.
    result = None

    def answered() -> bool:
        nonlocal result
        result = kafka_tool("kafka-metadata-quorum", "--bootstrap-controller", quorum.bootstrap_servers,
                            "describe", "--status", check=False)  # fmt: skip
        return result.returncode == 0 or "current MetadataVersion" not in result.stderr

    wait_until(answered, timeout=60, interval=1.0)
    assert result is not None and result.returncode == 0, result.stderr if result else None
    out = result.stdout
    return {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in out.splitlines() if ":" in line)}


def test_broker_finds_the_leader_of_three_controllers(
    kraft_quorum_3: ControllerQuorum, cluster_broker_factory: ClusterBrokerFactory
) -> None:
    leader_id = int(quorum_status(kraft_quorum_3)["LeaderId"])
    ordered = sorted(kraft_quorum_3.controllers, key=lambda c: c.node_id == leader_id)  # the leader last
    assert ordered[0].node_id != leader_id
    broker = cluster_broker_factory(kraft_quorum_3, BROKER_ID, **{
        "controller.quorum.bootstrap.servers": ",".join(c.endpoint for c in ordered),
    })  # fmt: skip
    broker.start()
    try:
        wait_until(
            lambda: "RECOVERY -> RUNNING" in broker.log_path.read_text(),
            "the broker to be unfenced",
            timeout=40,
        )
        # the UnfenceBrokerRecord may reach the image a fetch after the heartbeat that said RUNNING
        wait_until(
            lambda: f"metadata: broker {BROKER_ID} is unfenced" in broker.log_path.read_text(),
            "the unfencing in the image",
            timeout=40,
        )
        log_text = broker.log_path.read_text()
        assert f"broker {BROKER_ID} registration: NOT_CONTROLLER from {ordered[0].endpoint}" in log_text
        status = quorum_status(kraft_quorum_3)
        assert f'"id": {BROKER_ID}' in status["CurrentObservers"], status
        # Forwarding starts at the first bootstrap controller, not the active one: its NOT_CONTROLLER
        # sends the Envelope on to the leader, and the client sees only the topic created.
        out = kafka_tool("kafka-topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", "forwarded",
                         "--partitions", "1", "--replication-factor", "1").stdout  # fmt: skip
        assert "Created topic forwarded." in out
        assert (
            f"forwarding: {ordered[0].endpoint} is not the active controller" in broker.log_path.read_text()
        )
        wait_until(
            lambda: "metadata: forwarded-0 leader" in broker.log_path.read_text(),
            "the topic in the image",
            timeout=40,
        )
    finally:
        broker.stop()
