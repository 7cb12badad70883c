"""ClientReport: software named by ApiVersions v3+, versions used, requests the upstream lacks."""

from __future__ import annotations

from kcompat.proxy.client_report import ClientReport
from kcompat.wire.protocol import API_VERSIONS_KEY, encode_request

UPSTREAM = {0: (3, 11), 1: (4, 17), API_VERSIONS_KEY: (0, 4)}


def _hello(name: str, version: str) -> bytes:
    body = {"client_software_name": name, "client_software_version": version}
    return encode_request(API_VERSIONS_KEY, 3, 1, body)[4:]


def test_named_clients_their_versions_and_what_the_upstream_lacks() -> None:
    report = ClientReport()
    report.request(1, "10.0.0.1", API_VERSIONS_KEY, 3, _hello("librdkafka", "2.6.0"), UPSTREAM)
    report.request(1, "10.0.0.1", 0, 11, b"", UPSTREAM)
    report.request(1, "10.0.0.1", 0, 12, b"", UPSTREAM)  # above the upstream's Produce v11
    report.request(2, "10.0.0.2", 1, 4, b"", UPSTREAM)  # never said who it is
    report.request(2, "10.0.0.2", 50, 0, b"", UPSTREAM)  # an API the upstream lacks
    by_name = {c["software_name"]: c for c in report.clients()}
    rd = by_name["librdkafka"]
    assert rd["software_version"] == "2.6.0" and rd["connections_open"] == 1
    assert rd["api_versions"] == {"ApiVersions": [3], "Produce": [11, 12]}
    assert rd["unsupported"] == [{"api": "Produce", "api_key": 0, "version": 12, "count": 1}]
    unknown = by_name["unknown"]
    assert [u["api_key"] for u in unknown["unsupported"]] == [50]
    metrics = report.metrics()
    assert 'kcompat_proxy_client_versions{software="librdkafka",version="2.6.0"} 1' in metrics
    assert 'kcompat_proxy_unsupported_requests_total{api="Produce",version="12"} 1' in metrics
    report.closed(1)
    assert 'kcompat_proxy_client_versions{software="librdkafka",version="2.6.0"} 0' in report.metrics()


def test_no_upstream_ranges_known_counts_nothing_unsupported() -> None:
    report = ClientReport()
    report.request(1, "h", 0, 99, b"", {})
    assert report.clients()[0]["unsupported"] == []


def test_a_label_cannot_break_the_metrics_format() -> None:
    report = ClientReport()
    report.request(1, "h", API_VERSIONS_KEY, 3, _hello('evil"name', "1\\0"), UPSTREAM)
    assert 'software="evil\\"name",version="1\\\\0"' in report.metrics()
