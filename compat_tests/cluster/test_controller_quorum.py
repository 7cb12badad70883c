"""The controller quorum fixture starts a real Kafka 4.3 controller formatted with only the
features kcompat implements, reachable on its controller listener (what a kcompat broker in
cluster mode will talk to)."""

from __future__ import annotations

from support import kafka_tool

from compat_tests.crash.wire_client import WireClient
from kcompat.testing_cluster import FEATURES, HOST, ControllerQuorum

BROKER_REGISTRATION, BROKER_HEARTBEAT, FETCH, FETCH_SNAPSHOT = 62, 63, 1, 59


def test_controller_listener_offers_the_kraft_broker_rpcs(kraft_quorum: ControllerQuorum) -> None:
    client = WireClient(HOST, kraft_quorum.controllers[0].port)
    try:
        response = client.call(
            18, 3, {"client_software_name": "kcompat-test", "client_software_version": "1"}
        )
    finally:
        client.close()
    assert response.error_code == 0
    keys = {r.api_key for r in response.api_keys}
    assert {BROKER_REGISTRATION, BROKER_HEARTBEAT, FETCH, FETCH_SNAPSHOT} <= keys
    finalized = {f.name: f.max_version_level for f in response.finalized_features}
    # What kcompat claims is finalized as formatted.
    for name, level in FEATURES.items():
        assert finalized.get(name, 0) == level, (name, finalized)
    assert finalized["metadata.version"] >= 7  # 3.3-IV3, the lowest a KRaft quorum accepts


def test_kafka_metadata_quorum_tool_sees_one_voter_leading(kraft_quorum: ControllerQuorum) -> None:
    out = kafka_tool(
        "kafka-metadata-quorum",
        "--bootstrap-controller",
        kraft_quorum.bootstrap_servers,
        "describe",
        "--status",
    ).stdout
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    assert fields["ClusterId"].strip() == kraft_quorum.cluster_id
    assert fields["LeaderId"].strip() == str(kraft_quorum.voter_ids[0])
    assert str(kraft_quorum.voter_ids[0]) in fields["CurrentVoters"]
