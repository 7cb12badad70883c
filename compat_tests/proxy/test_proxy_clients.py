"""The proxy's compatibility report (issue 27): confluent-kafka, kafka-python and Kafka's Java
tools through one proxy in front of one `kcompat serve`; GET /proxy/clients on the proxy's admin
listener names each client's software and version (ApiVersions v3+) and the API versions it used,
and /metrics carries kcompat_proxy_client_versions and kcompat_proxy_unsupported_requests_total,
the latter counting a request for an API the upstream did not advertise.
"""

from __future__ import annotations

import json
import socket
import struct
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import confluent_kafka
import kafka
import pytest
from support import kafka_tool

from compat_tests.client_data import unique
from compat_tests.proxy.checks import confluent_consume, confluent_produce, kafka_python_roundtrip, raw_frames
from compat_tests.proxy.harness import HOST, ProxyThread
from kcompat.testing import TEST_DEFAULTS, Broker, wait_until
from kcompat.wire.messages import APIS
from kcompat.wire.protocol import API_VERSIONS_KEY, decode_response, encode_request

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    base = tmp_path_factory.mktemp("proxy-clients-upstream")
    b = Broker(base / "data", base / "kcompat.log", overrides=dict(TEST_DEFAULTS))
    b.start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def proxy(broker: Broker) -> Iterator[ProxyThread]:
    with ProxyThread(broker.bootstrap, **{"proxy.admin.listener": f"{HOST}:0"}) as p:
        yield p


def _get(proxy: ProxyThread, path: str) -> str:
    with urllib.request.urlopen(f"{proxy.admin_url}{path}", timeout=10) as answer:
        return str(answer.read().decode())


def _clients(proxy: ProxyThread) -> dict[str, dict[str, Any]]:
    return {c["software_name"]: c for c in json.loads(_get(proxy, "/proxy/clients"))["clients"]}


def test_each_client_named_with_the_versions_it_used(proxy: ProxyThread) -> None:
    topic = unique("proxy-clients")
    confluent_produce(proxy.bootstrap, topic, ["c-0", "c-1"])
    assert sorted(confluent_consume(proxy.bootstrap, topic, unique("g"), 2)) == ["c-0", "c-1"]
    kafka_python_roundtrip(proxy.bootstrap, topic, ["k-0"], unique("g"), 3)
    kafka_tool("kafka-topics", "--bootstrap-server", proxy.bootstrap, "--describe", "--topic", topic)

    clients = _clients(proxy)
    rdkafka = clients["confluent-kafka-python"]
    assert rdkafka["software_version"].startswith(confluent_kafka.version()[0]), rdkafka
    assert rdkafka["connections_total"] >= 2 and "Produce" in rdkafka["api_versions"], rdkafka
    assert "Fetch" in rdkafka["api_versions"] and HOST in rdkafka["addresses"]
    python = clients["kafka-python"]
    assert python["software_version"] == kafka.__version__, python
    assert "Produce" in python["api_versions"] and "Fetch" in python["api_versions"], python
    java = clients["apache-kafka-java"]
    assert java["software_version"].startswith("4.3"), java
    assert "Metadata" in java["api_versions"], java
    for client in (rdkafka, python, java):  # every version used is one the proxy advertised
        for api, versions in client["api_versions"].items():
            spec = next(s for s in APIS.values() if s.name == api)
            assert all(v in spec.versions for v in versions), (api, versions)
        assert client["unsupported"] == [], client

    metrics = _get(proxy, "/metrics")
    assert "# TYPE kcompat_proxy_client_versions gauge" in metrics
    for name in ("confluent-kafka-python", "kafka-python", "apache-kafka-java"):
        version = clients[name]["software_version"]
        assert f'kcompat_proxy_client_versions{{software="{name}",version="{version}"}}' in metrics
    wait_until(lambda: all(c["connections_open"] == 0 for c in _clients(proxy).values()), timeout=30)


def _upstream_lacks(broker: Broker) -> tuple[int, int]:
    """An (API key, version) the proxy's codec knows and the upstream does not advertise."""
    (answer,) = raw_frames(broker.port, [encode_request(API_VERSIONS_KEY, 3, 1, {})], 1)
    _, body = decode_response(API_VERSIONS_KEY, 3, answer)
    have = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
    for key, spec in sorted(APIS.items()):
        if key not in have:
            return key, spec.versions.low
    raise AssertionError(f"the upstream advertises every API the proxy knows: {sorted(have)}")


def test_a_request_the_upstream_lacks_is_counted(broker: Broker, proxy: ProxyThread) -> None:
    key, version = _upstream_lacks(broker)
    name = APIS[key].name
    hello = encode_request(
        API_VERSIONS_KEY,
        3,
        1,
        {"client_software_name": "raw-test-client", "client_software_version": "0.1"},
        "raw",
    )
    header = struct.pack(">hhih", key, version, 2, 3) + b"raw"  # v1 header; the body does not matter
    lacking = struct.pack(">i", len(header)) + header
    with socket.create_connection((HOST, proxy.bootstrap_port), timeout=10) as s:
        s.sendall(hello)
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        s.recv(size, socket.MSG_WAITALL)
        s.sendall(lacking)
        wait_until(lambda: bool(_clients(proxy).get("raw-test-client", {}).get("unsupported")), timeout=10)
    raw = _clients(proxy)["raw-test-client"]
    assert raw["software_version"] == "0.1"
    assert raw["unsupported"] == [{"api": name, "api_key": key, "version": version, "count": 1}], raw
    assert raw["api_versions"] == {"ApiVersions": [3], name: [version]}, raw
    metrics = _get(proxy, "/metrics")
    assert f'kcompat_proxy_unsupported_requests_total{{api="{name}",version="{version}"}} 1' in metrics
    deadline = time.monotonic() + 10
    while "raw-test-client" in metrics and time.monotonic() < deadline:
        if 'software="raw-test-client",version="0.1"} 0' in metrics:
            break
        time.sleep(0.2)
        metrics = _get(proxy, "/metrics")
    assert 'kcompat_proxy_client_versions{software="raw-test-client",version="0.1"} 0' in metrics
