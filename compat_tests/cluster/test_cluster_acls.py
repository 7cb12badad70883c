"""ACLs in cluster mode: a REAL Kafka 4.3 controller with StandardAuthorizer, a `kcompat serve`
broker with it too. CreateAcls and DeleteAcls are forwarded to the controller (which authorizes
them with the client's principal from the Envelope), the controller's AccessControlEntryRecords
reach the broker's metadata image, and the broker's authorizer decides from them: DescribeAcls
answered by the broker, Metadata hiding what alice may not describe."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from support import ClusterBrokerFactory, log_has

from kcompat.testing import free_port, wait_until
from kcompat.testing_cluster import ControllerQuorum

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
NODE_ID = 1
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_admin="admin-secret" user_alice="alice-secret";')  # fmt: skip


@pytest.fixture(scope="module")
def secured_quorum(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerQuorum]:
    why_not = ControllerQuorum.available()
    if why_not is not None:
        pytest.fail(why_not, pytrace=False)
    # Brokers reach the controller listener as User:ANONYMOUS (PLAINTEXT); admin is the operator.
    props = {"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:ANONYMOUS;User:admin"}
    with ControllerQuorum(tmp_path_factory.mktemp("acl-quorum"), voters=1, properties=props) as quorum:
        yield quorum


def client(broker: Any, user: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.address("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
                        "sasl.mechanisms": "PLAIN", "sasl.username": user, "sasl.password": f"{user}-secret"})  # fmt: skip


@pytest.mark.slow  # its own controller JVM: ~40 s on the shared machine, beyond the default layer's budget
def test_acls_from_the_metadata_log(
    secured_quorum: ControllerQuorum, cluster_broker_factory: ClusterBrokerFactory, tmp_path: Path
) -> None:
    broker = cluster_broker_factory(
        secured_quorum,
        NODE_ID,
        **{
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "authorizer.class.name": STANDARD_AUTHORIZER,
            "super.users": "User:admin;User:ANONYMOUS",
        },
    )
    broker.listeners["SASL_PLAINTEXT"] = free_port()
    broker.start()
    wait_until(
        lambda: log_has(broker, f"metadata: broker {NODE_ID} is unfenced"), "the unfencing record", timeout=40
    )
    admin, alice = client(broker, "admin"), client(broker, "alice")
    for f in admin.create_topics([NewTopic("orders", 1, 1), NewTopic("hidden", 1, 1)]).values():
        f.result(30)
    wait_until(
        lambda: {"orders", "hidden"} <= set(admin.list_topics(timeout=10).topics),
        "the topics in the image",
        timeout=40,
    )
    assert not {"orders", "hidden"} & set(alice.list_topics(timeout=10).topics)  # no ACLs: nothing

    read = AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "*",
                      AclOperation.READ, AclPermissionType.ALLOW)  # fmt: skip
    # alice may not change ACLs: the controller refuses her (her principal came in the Envelope)
    with pytest.raises(KafkaException) as refused:
        alice.create_acls([read])[read].result(30)
    assert "CLUSTER_AUTHORIZATION_FAILED" in str(refused.value) or "authoriz" in str(refused.value).lower()
    assert admin.create_acls([read])[read].result(30) is None

    every = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip
    wait_until(
        lambda: set(alice.list_topics(timeout=10).topics) >= {"orders"},
        "the ACL in the broker's image",
        timeout=40,
    )
    assert "hidden" not in alice.list_topics(timeout=10).topics
    described = admin.describe_acls(every).result(30)
    assert [(b.name, b.principal, b.operation) for b in described] == [
        ("orders", "User:alice", AclOperation.READ)
    ]

    deleted = admin.delete_acls([every])[every].result(30)
    assert [b.name for b in deleted] == ["orders"]
    wait_until(
        lambda: "orders" not in alice.list_topics(timeout=10).topics,
        "the removal in the broker's image",
        timeout=40,
    )
    assert admin.describe_acls(every).result(30) == []
